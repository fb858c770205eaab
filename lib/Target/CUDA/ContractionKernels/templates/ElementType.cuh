//===- ElementType.cuh - Template kernels' element types, one enum --------===//
//
// Both sides of the template kernels read this file: the emitter includes it
// as C++ (GemmPlan.h; elementTypeName writes these names into the generated
// Cfg and epilogue), and every NVRTC source starts with it, so the
// templates compare Cfg::OUT_CODE and loadAsFloat's Code with these names,
// never with bare integers. The values are runtime::DType's (GemmPlan.h
// checks them with static_asserts).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEMPLATES_ELEMENTTYPE_CUH
#define KILN_TEMPLATES_ELEMENTTYPE_CUH

enum KilnElementType : int {
  /// No such operand (AUX_CODE when there is no second output).
  kElementNone = 0,
  kElementF32 = 1,
  kElementF16 = 2,
  kElementBF16 = 3,
  /// The int8 family's (GemmInt8.cuh) operands and outputs.
  kElementS8 = 5,
  kElementS32 = 7,
  kElementU8 = 9,
  /// The fp8 families' (MmaF8, WgmmaF8) operands: OCP float8 e4m3 (no
  /// infinities) and e5m2.
  kElementE4M3 = 14,
  kElementE5M2 = 16,
};

#endif // KILN_TEMPLATES_ELEMENTTYPE_CUH
