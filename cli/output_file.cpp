// Safe output files for the CLI: refuse to overwrite without --force; temp file + rename.
#include "output_file.hpp"

#include "tessel/cost/errors.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tessel::cli {

void writeOutputFile(const std::string& path, const std::string& text, bool force, const std::string& flag) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path, ec) && !force)
        throw InputError(flag, "\"" + path + "\" exists; pass --force to overwrite it");
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw RuntimeError("cannot write \"" + tmp + "\"");
        out << text;
        out.flush();
        if (!out) throw RuntimeError("cannot write \"" + tmp + "\"");
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw RuntimeError("cannot rename \"" + tmp + "\" to \"" + path + "\": " + ec.message());
    }
}

} // namespace tessel::cli
