#pragma once
// The one place ConvertOptions becomes what each stage of a conversion takes: the workers'
// sample recipe, the writer's layout, ... Made once per run, by plan_run (convert.cpp), after
// the inputs are expanded and the class folders found; each stage then sees only its own spec.
#include "convert/convert_options.h"
#include "convert/dataset_writer.h"
#include "convert/remote_output.h"
#include "convert/run_manifest.h"
#include "convert/run_recorder.h"
#include "convert/sample_feed.h"
#include "convert/sample_recipe.h"

namespace tarmac {

/// The workers' recipe. Takes `o.labels.classes` as they are: under --classes-from-dirs the
/// caller finds them first.
SampleRecipe sample_recipe(const ConvertOptions& o);

/// The writer's layout (the class list likewise).
WriterSpec writer_spec(const ConvertOptions& o);

/// The reader thread's feed.
FeedSpec feed_spec(const ConvertOptions& o);

/// The writer thread's recorder (`o.source.inputs` expanded by then).
RecorderSpec recorder_spec(const ConvertOptions& o);

/// -o s3://'s uploads and lock.
RemoteOutputSpec remote_output_spec(const ConvertOptions& o);

/// What the manifest records of the options (`o.source.inputs` expanded by then).
ManifestSpec manifest_spec(const ConvertOptions& o);

}  // namespace tarmac
