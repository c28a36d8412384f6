#pragma once
// The one place ConvertOptions becomes what each stage of a conversion takes: the workers'
// sample recipe, the writer's layout, ... Made once per run, by plan_run (convert.cpp), after
// the inputs are expanded and the class folders found; each stage then sees only its own spec.
#include "convert/convert_options.h"
#include "convert/dataset_writer.h"
#include "convert/sample_recipe.h"

namespace tarmac {

/// The workers' recipe. Takes `o.labels.classes` as they are: under --classes-from-dirs the
/// caller finds them first.
SampleRecipe sample_recipe(const ConvertOptions& o);

/// The writer's layout (the class list likewise).
WriterSpec writer_spec(const ConvertOptions& o);

}  // namespace tarmac
