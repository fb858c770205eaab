// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels -kiln-match-contractions | FileCheck %s

// A bf16 3x3 convolution with bias, batch norm, residual add and relu is one
// implicit-GEMM kernel reading the image, the filter (16 channels: no
// padding), the bias and the epilogue's tensors where they lie (each read
// once; the splat variance is a literal).
// CHECK-LABEL: func.func @conv_bn_add_relu(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x8x8x16xbf16>, %[[R:[^:]*]]: tensor<2x8x8x32xf32>, %[[B:[^:]*]]: tensor<32xf32>, %[[S:[^:]*]]: tensor<32xf32>, %[[M:[^:]*]]: tensor<32xf32>
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w3 : tensor<32x3x3x16xbf16>
// CHECK-NOT:     kiln.fusion
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x8x8x32xf32>
// CHECK:         kiln.call_kernel @kiln_conv_0::@kiln_conv_0 ins(%[[X]], %[[W]], %[[B]], %[[S]], %[[M]], %[[R]] : {{.*}}) outs(%[[E]] : tensor<2x8x8x32xf32>)
// CHECK-SAME:      scalars [128 : i32, 16, 32]
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = mma_f16
ml_program.global private @w3(dense<0.5> : tensor<32x3x3x16xbf16>) : tensor<32x3x3x16xbf16>
func.func @conv_bn_add_relu(%x: tensor<2x8x8x16xbf16>, %r: tensor<2x8x8x32xf32>, %b: tensor<32xf32>, %s: tensor<32xf32>, %m: tensor<32xf32>) -> tensor<2x8x8x32xf32> {
  %w = ml_program.global_load_const @w3 : tensor<32x3x3x16xbf16>
  %v = kiln.constant dense<2.0> : tensor<32xf32>
  %y = kiln.fusion "conv" -> tensor<2x8x8x32xf32> {
    %c = kiln.conv %x, %w, %b {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x8x8x16xbf16>, tensor<32x3x3x16xbf16>, tensor<32xf32>) -> tensor<2x8x8x32xf32>
    %n = kiln.batch_norm %c, %s, %b, %m, %v {data_format = #kiln.data_format<nhwc>} : (tensor<2x8x8x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x8x32xf32>
    %a = kiln.add %n, %r : tensor<2x8x8x32xf32>, tensor<2x8x8x32xf32> -> tensor<2x8x8x32xf32>
    %o = kiln.relu %a : tensor<2x8x8x32xf32>
    kiln.yield %o : tensor<2x8x8x32xf32>
  }
  return %y : tensor<2x8x8x32xf32>
}

// -----

// A grouped f32 convolution with 3 channels per group: the filter's
// channels are padded to 4 (the FFMA kernel's chunk) into a new global whose
// origin records the pad; the old global goes when nothing reads it.
// CHECK-LABEL: module
// CHECK-NOT:     ml_program.global private @wg(
// CHECK:         ml_program.global private @wg_cpad(dense_resource<wg_cpad> : tensor<6x3x3x4xf32>) : tensor<6x3x3x4xf32> {kiln.origin = "initializer f32 6x3x3x3 wg\0Apad 0,0,0,0 0,0,0,1"}
// CHECK-NOT:     ml_program.global private @wg(
// CHECK-LABEL: func.func @grouped(
// CHECK:         %[[W:.*]] = ml_program.global_load_const @wg_cpad : tensor<6x3x3x4xf32>
// CHECK:         kiln.call_kernel @kiln_conv_0::@kiln_conv_0 ins(%{{.*}}, %[[W]] : tensor<1x9x9x6xf32>, tensor<6x3x3x4xf32>)
// CHECK-SAME:      scalars [25 : i32, 3, 3]
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = simt_f32
ml_program.global private @wg(dense<1.0> : tensor<6x3x3x3xf32>) : tensor<6x3x3x3xf32> {kiln.origin = "initializer f32 6x3x3x3 wg"}
func.func @grouped(%x: tensor<1x9x9x6xf32>) -> tensor<1x5x5x6xf32> {
  %w = ml_program.global_load_const @wg : tensor<6x3x3x3xf32>
  %y = kiln.fusion "conv" -> tensor<1x5x5x6xf32> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x9x9x6xf32>, tensor<6x3x3x3xf32>) -> tensor<1x5x5x6xf32>
    kiln.yield %c : tensor<1x5x5x6xf32>
  }
  return %y : tensor<1x5x5x6xf32>
}

// -----

// tf32: the rounding pair on the image is the kernel's own (tf32 mma
// rounds its operands); the image is read before it.
// CHECK-LABEL: func.func @tf32(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x4x4x8xf32>
// CHECK:         kiln.call_kernel @kiln_conv_0::@kiln_conv_0 ins(%[[X]], %{{.*}} : tensor<1x4x4x8xf32>, tensor<16x1x1x8xf32>)
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = mma_tf32
ml_program.global private @w1(dense<1.0> : tensor<16x1x1x8xf32>) : tensor<16x1x1x8xf32> {kiln.tf32_rounded}
func.func @tf32(%x: tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32> {
  %w = ml_program.global_load_const @w1 : tensor<16x1x1x8xf32>
  %y = kiln.fusion "conv" -> tensor<1x4x4x16xf32> {
    %t = kiln.cast %x : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xtf32>
    %u = kiln.cast %t : tensor<1x4x4x8xtf32> -> tensor<1x4x4x8xf32>
    %c = kiln.conv %u, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, kiln.tf32, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x8xf32>, tensor<16x1x1x8xf32>) -> tensor<1x4x4x16xf32>
    kiln.yield %c : tensor<1x4x4x16xf32>
  }
  return %y : tensor<1x4x4x16xf32>
}

// -----

// An image the region computes (the cast to bf16 before the first
// convolution) is split off into a region of its own before the kernel.
// CHECK-LABEL: func.func @computed_image(
// CHECK:         %[[P:.*]] = kiln.fusion "elementwise" -> tensor<1x6x6x8xbf16> {
// CHECK-NEXT:      kiln.cast
// CHECK:         kiln.call_kernel @kiln_conv_0::@kiln_conv_0 ins(%[[P]], %{{.*}} : tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>)
ml_program.global private @wc(dense<1.0> : tensor<8x3x3x8xbf16>) : tensor<8x3x3x8xbf16>
func.func @computed_image(%x: tensor<1x6x6x8xf32>) -> tensor<1x4x4x8xbf16> {
  %w = ml_program.global_load_const @wc : tensor<8x3x3x8xbf16>
  %y = kiln.fusion "conv" -> tensor<1x4x4x8xbf16> {
    %h = kiln.cast %x : tensor<1x6x6x8xf32> -> tensor<1x6x6x8xbf16>
    %c = kiln.conv %h, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>) -> tensor<1x4x4x8xf32>
    %o = kiln.cast %c : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xbf16>
    kiln.yield %o : tensor<1x4x4x8xbf16>
  }
  return %y : tensor<1x4x4x8xbf16>
}

// -----

// A depthwise convolution (one input channel per group) with bias and relu
// becomes the CUDA-core depthwise kernel: the filter, a weight global seen
// through the importer's reshape, is reordered to [KH][KW][O][1] into a new
// global whose origin records the reshape and the transpose; the old global
// goes. bf16 with 16 channels: 8 channels a thread (16-byte loads).
// CHECK-NOT:     ml_program.global private @wd(
// CHECK:         ml_program.global private @wd_dw(dense_resource<wd_dw> : tensor<3x3x16x1xbf16>) : tensor<3x3x16x1xbf16> {kiln.origin = "initializer f32 16x1x3x3 wd\0Aconvert bf16\0Areshape 16,3,3,1\0Atranspose 1,2,0,3"}
// CHECK-NOT:     ml_program.global private @wd(
// CHECK-LABEL: func.func @depthwise(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x8x8x16xbf16>, %[[B:[^:]*]]: tensor<16xf32>
// CHECK:         %[[W:.*]] = ml_program.global_load_const @wd_dw : tensor<3x3x16x1xbf16>
// CHECK-NOT:     kiln.fusion
// CHECK:         kiln.call_kernel @kiln_dwconv_{{[0-9]+}}::@kiln_dwconv_{{[0-9]+}} ins(%[[X]], %[[W]], %[[B]] : {{.*}}) outs(%{{.*}} : tensor<1x8x8x16xf32>)
// CHECK-SAME:      kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>
ml_program.global private @wd(dense<0.25> : tensor<16x1x3x3xbf16>) : tensor<16x1x3x3xbf16> {kiln.origin = "initializer f32 16x1x3x3 wd\0Aconvert bf16"}
func.func @depthwise(%x: tensor<1x8x8x16xbf16>, %b: tensor<16xf32>) -> tensor<1x8x8x16xf32> {
  %w0 = ml_program.global_load_const @wd : tensor<16x1x3x3xbf16>
  %y = kiln.fusion "conv" -> tensor<1x8x8x16xf32> {
    %w = kiln.reshape %w0 : tensor<16x1x3x3xbf16> -> tensor<16x3x3x1xbf16>
    %c = kiln.conv %x, %w, %b {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 16 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xbf16>, tensor<16x3x3x1xbf16>, tensor<16xf32>) -> tensor<1x8x8x16xf32>
    %r = kiln.relu %c : tensor<1x8x8x16xf32>
    kiln.yield %r : tensor<1x8x8x16xf32>
  }
  return %y : tensor<1x8x8x16xf32>
}

// -----

// A depthwise filter computed at run time keeps the generic kernel (the
// kernel reads a filter reordered at compile time).
// CHECK-LABEL: func.func @depthwise_runtime_filter(
// CHECK:         kiln.fusion "conv"
// CHECK:         kiln.generic_reason = "depthwise: the filter is computed at run time"
func.func @depthwise_runtime_filter(%x: tensor<1x8x8x16xf32>, %w: tensor<16x3x3x1xf32>) -> tensor<1x8x8x16xf32> {
  %y = kiln.fusion "conv" -> tensor<1x8x8x16xf32> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 16 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, tensor<16x3x3x1xf32>) -> tensor<1x8x8x16xf32>
    kiln.yield %c : tensor<1x8x8x16xf32>
  }
  return %y : tensor<1x8x8x16xf32>
}

// -----

// The kernels read NHWC images only.
// CHECK-LABEL: func.func @nchw(
// CHECK:         kiln.generic_reason = "an nchw convolution (the kernels read nhwc)"
func.func @nchw(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %y = kiln.fusion "conv" -> tensor<1x8x4x4xf32> {
    %c = kiln.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x4x4xf32>
    kiln.yield %c : tensor<1x8x4x4xf32>
  }
  return %y : tensor<1x8x4x4xf32>
}

// -----

// A filter known only at run time cannot be channel-padded at compile time.
// CHECK-LABEL: func.func @runtime_filter(
// CHECK:         kiln.generic_reason = "a filter computed at run time whose channels need padding to 8"
func.func @runtime_filter(%x: tensor<1x6x6x6xbf16>, %w: tensor<4x3x3x3xbf16>) -> tensor<1x4x4x4xf32> {
  %y = kiln.fusion "conv" -> tensor<1x4x4x4xf32> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x6xbf16>, tensor<4x3x3x3xbf16>) -> tensor<1x4x4x4xf32>
    kiln.yield %c : tensor<1x4x4x4xf32>
  }
  return %y : tensor<1x4x4x4xf32>
}

// -----

// Two results, an f32 one (a residual add's operand) and its bf16 copy (the
// next convolution's image): one kernel stores both, C (pointer 2) and the
// second output "aux" (pointer 3), from the same accumulators.
// CHECK-LABEL: func.func @two_results(
// CHECK:         %[[F:.*]] = tensor.empty() : tensor<1x4x4x8xf32>
// CHECK:         %[[B:.*]] = tensor.empty() : tensor<1x4x4x8xbf16>
// CHECK:         %[[K:.*]]:2 = kiln.call_kernel @kiln_conv_0::@kiln_conv_0 ins(%arg0, %{{.*}} : tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>) outs(%[[F]], %[[B]] : tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>)
// CHECK-SAME:      pointer_order = array<i32: 0, 1, 2, 3>
// CHECK-NOT:     kiln.fusion
// CHECK:         return %[[K]]#0, %[[K]]#1
ml_program.global private @w2r(dense<1.0> : tensor<8x3x3x8xbf16>) : tensor<8x3x3x8xbf16>
func.func @two_results(%x: tensor<1x6x6x8xbf16>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>) {
  %w = ml_program.global_load_const @w2r : tensor<8x3x3x8xbf16>
  %y:2 = kiln.fusion "conv" -> tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>) -> tensor<1x4x4x8xf32>
    %r = kiln.relu %c : tensor<1x4x4x8xf32>
    %h = kiln.cast %r : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xbf16>
    kiln.yield %r, %h : tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>
  }
  return %y#0, %y#1 : tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>
}

// -----

// A second output wider than the stored one (a bf16 value and its f32
// copy) or more than one other result: the kernel stores one result and
// the others move to a region after it.
// CHECK-LABEL: func.func @split_results(
// CHECK:         %[[K:.*]] = kiln.call_kernel @kiln_conv_0::@kiln_conv_0 {{.*}} -> tensor<1x4x4x8xbf16>
// CHECK:         %[[W:.*]] = kiln.fusion "elementwise" -> tensor<1x4x4x8xf32> {
// CHECK-NEXT:      kiln.cast %[[K]] : tensor<1x4x4x8xbf16> -> tensor<1x4x4x8xf32>
// CHECK:         %[[L:.*]] = kiln.call_kernel @kiln_conv_1::@kiln_conv_1 {{.*}} -> tensor<1x4x4x8xf32>
// CHECK:         %[[R:.*]]:2 = kiln.fusion "elementwise" -> tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf16> {
// CHECK-NEXT:      kiln.cast %[[L]] : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xbf16>
// CHECK-NEXT:      kiln.cast %[[L]] : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf16>
// CHECK:         return %[[K]], %[[W]], %[[L]], %[[R]]#0, %[[R]]#1
ml_program.global private @w3r(dense<1.0> : tensor<8x3x3x8xbf16>) : tensor<8x3x3x8xbf16>
func.func @split_results(%x: tensor<1x6x6x8xbf16>) -> (tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf16>) {
  %w = ml_program.global_load_const @w3r : tensor<8x3x3x8xbf16>
  %y:2 = kiln.fusion "conv" -> tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf32> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>) -> tensor<1x4x4x8xf32>
    %h = kiln.cast %c : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xbf16>
    %f = kiln.cast %h : tensor<1x4x4x8xbf16> -> tensor<1x4x4x8xf32>
    kiln.yield %h, %f : tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf32>
  }
  %z:3 = kiln.fusion "conv" -> tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf16> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x8xbf16>, tensor<8x3x3x8xbf16>) -> tensor<1x4x4x8xf32>
    %h = kiln.cast %c : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xbf16>
    %g = kiln.cast %c : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf16>
    kiln.yield %c, %h, %g : tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf16>
  }
  return %y#0, %y#1, %z#0, %z#1, %z#2 : tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xf16>
}
