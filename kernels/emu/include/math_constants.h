/* amk CPU emulator (kernels/emu): the CUDA math constants amk's kernels use. */
#ifndef AMK_EMU_MATH_CONSTANTS_H
#define AMK_EMU_MATH_CONSTANTS_H

#include <limits>

#define CUDART_INF_F (std::numeric_limits<float>::infinity())
#define CUDART_NAN_F (std::numeric_limits<float>::quiet_NaN())
#define CUDART_INF (std::numeric_limits<double>::infinity())
#define CUDART_NAN (std::numeric_limits<double>::quiet_NaN())
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0

#endif /* AMK_EMU_MATH_CONSTANTS_H */
