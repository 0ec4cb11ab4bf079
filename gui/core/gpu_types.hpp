// The GPU types the GUI's cluster box offers: one GPU spec per GPU name, from the shipped cluster presets.
#pragma once

#include "tessel/cost/cluster.hpp"

#include <QString>

#include <map>
#include <vector>

namespace tessel::gui {

// Each GPU named by the first preset that names it, in the order given, leaving out calibrated presets: several
// presets name the same GPU, and a calibrated one's figures predict tessel's own executor on that card (its
// kernels and overheads), not a training framework's.
std::map<QString, GpuSpec> gpuTypesFromPresets(const std::vector<ClusterConfig>& presets);

} // namespace tessel::gui
