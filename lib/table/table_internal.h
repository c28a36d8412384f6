#pragma once
// Helpers the per-format readers share: columns from per-row values, and the image column.
#include <string>
#include <string_view>
#include <vector>

#include "labels/field_value.h"
#include "table/table.h"

namespace tarmac::detail {

/// A column from one value per row: uniform (one buffer) when every row is a non-null
/// numeric tensor of one dtype and shape, else the values as they are.
TableColumn make_column(std::string name, std::vector<FieldValue> values);

/// A String value holding `text`.
FieldValue string_value(std::string_view text);
/// A null value (the row has nothing for the column).
FieldValue null_value();

/// Moves the label column named `image_column` (or `default_name` when that is empty) into
/// table.member_columns[0] / member_paths[0]. Throws FatalError, naming the file, when the
/// column is missing (listing the columns there are) or a row's value is not a non-empty
/// string.
void take_image_column(Table& table, const std::string& path, const std::string& image_column,
                       const std::string& default_name);

/// "'a', 'b', 'c'" (for messages).
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace tarmac::detail
