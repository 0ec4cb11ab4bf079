// The GPU types the GUI's cluster box offers.
#include "core/gpu_types.hpp"

namespace tessel::gui {

std::map<QString, GpuSpec> gpuTypesFromPresets(const std::vector<ClusterConfig>& presets) {
    std::map<QString, GpuSpec> types;
    for (const ClusterConfig& c : presets)
        if (!c.calibration) types.emplace(QString::fromStdString(c.gpu.name), c.gpu);
    return types;
}

} // namespace tessel::gui
