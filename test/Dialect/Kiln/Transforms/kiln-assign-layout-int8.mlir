// kiln-assign-layout's int8-convs option (kilnc --int8-kernels): a
// quantized convolution chain the int8 tensor-core kernel takes makes the
// auto layout NHWC even in fp32, and is not channel-padded (the kernel pads
// its filter itself). Without the option fp32 auto stays NCHW, and a forced
// NHWC pads the 3 channels to 8 as for any convolution.
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=auto precision=fp32 int8-convs=true" | FileCheck %s --check-prefix=INT8
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc int8-convs=true" | FileCheck %s --check-prefix=FORCED
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=auto precision=fp32" | FileCheck %s --check-prefix=NCHW
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc" | FileCheck %s --check-prefix=PADDED
// The chain is still one after the layout change (its per-channel
// multipliers moved to the last dimension), so kiln-fuse-quantized makes
// its region.
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-assign-layout{layout=auto precision=fp32 int8-convs=true},func.func(kiln-fuse-quantized{matmuls=false report=true}))" 2>&1 | FileCheck %s --check-prefix=FUSED

ml_program.global private @w(dense<1> : tensor<2x3x3x3xi8>) : tensor<2x3x3x3xi8>
// INT8-LABEL: func.func @qlinear_conv
// INT8-NOT:     kiln.pad
// INT8:         ml_program.global_load_const @w_nhwc : tensor<2x3x3x3xi8>
// INT8-NOT:     kiln.pad
// INT8:         kiln.conv {{.*}}data_format = #kiln.data_format<nhwc>{{.*}} : (tensor<1x6x6x3xf64>, tensor<2x3x3x3xf64>, tensor<2xf64>) -> tensor<1x6x6x2xf64>
// INT8:         kiln.mul {{.*}} : tensor<1x6x6x2xf64>, tensor<1x1x1x2xf64>
// INT8:         kiln.transpose {{.*}} : tensor<1x6x6x2xui8> -> tensor<1x2x6x6xui8>
// FORCED-LABEL: func.func @qlinear_conv
// FORCED-NOT:     kiln.pad
// FORCED:         kiln.conv {{.*}} : (tensor<1x6x6x3xf64>, tensor<2x3x3x3xf64>, tensor<2xf64>) -> tensor<1x6x6x2xf64>
// NCHW-LABEL: func.func @qlinear_conv
// NCHW-NOT:     kiln.transpose
// NCHW:         kiln.conv {{.*}} -> tensor<1x2x6x6xf64>
// PADDED-LABEL: func.func @qlinear_conv
// PADDED:         kiln.pad
// PADDED:         kiln.conv {{.*}} : (tensor<1x6x6x8xf64>, tensor<2x3x3x8xf64>, tensor<2xf64>) -> tensor<1x6x6x2xf64>
// FUSED: remark: int8 kernel (QLinearConv, int32 bias): A ui8 zero point 3, B i8 constant, zero point 0, scale per column (2, 2.500000e-01 to 5.000000e-01) (f32), output ui8 zero point 0
// FUSED: kiln.fusion "quantized_conv" -> tensor<1x6x6x2xui8>
func.func @qlinear_conv(%x: tensor<1x3x6x6xui8>) -> tensor<1x2x6x6xui8> {
  %w = ml_program.global_load_const @w : tensor<2x3x3x3xi8>
  %0 = kiln.cast %x : tensor<1x3x6x6xui8> -> tensor<1x3x6x6xi32>
  %1 = kiln.constant dense<3> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<1x3x6x6xi32>, tensor<i32> -> tensor<1x3x6x6xi32>
  %3 = kiln.cast %w : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xi32>
  %4 = kiln.cast %2 : tensor<1x3x6x6xi32> -> tensor<1x3x6x6xf64>
  %5 = kiln.cast %3 : tensor<2x3x3x3xi32> -> tensor<2x3x3x3xf64>
  %6 = kiln.constant dense<[7.000000e+00, -1.200000e+01]> : tensor<2xf64>
  %7 = kiln.conv %4, %5, %6 {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x6x6xf64>, tensor<2x3x3x3xf64>, tensor<2xf64>) -> tensor<1x2x6x6xf64>
  %8 = kiln.constant dense<[[[[5.000000e-01]], [[2.500000e-01]]]]> : tensor<1x2x1x1xf64>
  %9 = kiln.mul %7, %8 : tensor<1x2x6x6xf64>, tensor<1x2x1x1xf64> -> tensor<1x2x6x6xf64>
  %10 = kiln.round %9 : tensor<1x2x6x6xf64>
  %11 = kiln.clip %10 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x2x6x6xf64>
  %12 = kiln.cast %11 : tensor<1x2x6x6xf64> -> tensor<1x2x6x6xui8>
  return %12 : tensor<1x2x6x6xui8>
}

// -----

// A float convolution: int8-convs changes nothing, fp32 auto is NCHW.
// INT8-LABEL: func.func @float_conv
// INT8:         kiln.conv
// INT8-NOT:     data_format
// INT8-SAME:    -> tensor<1x2x6x6xf32>
// NCHW-LABEL: func.func @float_conv
// FORCED-LABEL: func.func @float_conv
// FORCED:         kiln.pad
// FORCED:         kiln.conv {{.*}} -> tensor<1x6x6x2xf32>
// PADDED-LABEL: func.func @float_conv
// FUSED-NOT: remark
func.func @float_conv(%x: tensor<1x3x6x6xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x2x6x6xf32> {
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x6x6xf32>, tensor<2x3x3x3xf32>) -> tensor<1x2x6x6xf32>
  return %0 : tensor<1x2x6x6xf32>
}
