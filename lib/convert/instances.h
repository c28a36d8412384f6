#pragma once
// --instances: one output per entry along the first axis of a label field. The --instance-fields
// are sliced alike (numeric arrays by row, JSON arrays by entry), the other fields copied to
// each, and `__row__` gives each output its entry's index. And the bound on how many outputs
// one source sample may make (--max-outputs-per-sample).
#include <cstdint>
#include <string>
#include <vector>

#include "convert/sample_recipe.h"
#include "labels/schema.h"

namespace tarmac {

/// Refuses (SampleError) a source sample that would make more than `limits`'
/// max_outputs_per_sample outputs: "<subject> <count> <noun>, more than ...".
void check_output_count(uint64_t count, const std::string& subject, const char* noun,
                        const SampleLimits& limits);

/// The label sets of a sample's instances, in entry order, each with `__row__` = its index.
/// SampleError (BadField) when the instances field is missing or has no first axis, or an
/// instance field's entries are not as many.
std::vector<std::vector<SampleField>> split_instances(const std::vector<SampleField>& fields,
                                                      const LabelRecipe& labels,
                                                      const SampleLimits& limits);

}  // namespace tarmac
