// Writing a user-named output file safely: never overwrite without --force, write to a temporary then rename.
#pragma once

#include <string>

namespace tessel::cli {

// Writes `text` to `path`. Throws InputError naming `flag` if the file exists and `force` is false, and
// RuntimeError if it cannot be written. The text goes to PATH.tmp first and is renamed over PATH, so an
// interrupted write never leaves a half-written file under the user's name.
void writeOutputFile(const std::string& path, const std::string& text, bool force, const std::string& flag);

} // namespace tessel::cli
