#pragma once
// IEEE half and bfloat16 storage <-> float, rounding to nearest even like the hardware.
#include <cstdint>

namespace simgpu {

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

}  // namespace simgpu
