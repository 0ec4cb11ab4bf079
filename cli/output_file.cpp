// Safe output files for the CLI: refuse to overwrite without --force; temp file + rename.
#include "output_file.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/exec/run_output.hpp"

#include <filesystem>

namespace tessel::cli {

void writeOutputFile(const std::string& path, const std::string& text, bool force, const std::string& flag) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path, ec) && !force)
        throw InputError(flag, "\"" + path + "\" exists; pass --force to overwrite it");
    exec::writeFileAtomically(path, text);
}

} // namespace tessel::cli
