// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the kiln verifiers and type inference, plus a
// representative set of ODS constraint failures. Ops with inferred result
// types report an inference failure twice: the reason, at the op, then
// "failed to infer returned types".

// clip: the lower bound exceeds the upper bound.
func.func @clip_min_exceeds_max(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.clip' op min (6.000000e+00) exceeds max (0.000000e+00)}}
  %0 = kiln.clip %x {min = 6.0 : f64, max = 0.0 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// mod on floats needs the fmod attribute.
func.func @mod_float_without_fmod(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.mod' op on floats requires the 'fmod' attribute}}
  %0 = kiln.mod %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Binary ops need operands of one element type.
func.func @add_element_types_differ(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{'kiln.add' op failed to infer returned types}}
  %0 = kiln.add %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Binary operand shapes must broadcast.
func.func @sub_shapes_do_not_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{operand shapes 'tensor<2x3xf32>' and 'tensor<4xf32>' do not broadcast}}
  // expected-error @+1 {{'kiln.sub' op failed to infer returned types}}
  %0 = kiln.sub %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// The written result type must be the broadcast type.
func.func @mul_wrong_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{'kiln.mul' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'kiln.mul' op failed to infer returned types}}
  %0 = kiln.mul %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Comparisons yield i1, not the operand element type.
func.func @less_result_not_i1(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{'kiln.less' op inferred type(s) 'tensor<3xi1>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'kiln.less' op failed to infer returned types}}
  %0 = kiln.less %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Comparisons need operands of one element type too.
func.func @equal_element_types_differ(%a: tensor<3xi32>, %b: tensor<3xi64>) -> tensor<3xi1> {
  // expected-error @+2 {{operand element types differ: 'i32' vs 'i64'}}
  // expected-error @+1 {{'kiln.equal' op failed to infer returned types}}
  %0 = kiln.equal %a, %b : tensor<3xi32>, tensor<3xi64> -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

// select: the two values must share an element type.
func.func @select_value_types_differ(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<2xf32> {
  // expected-error @+2 {{true and false values differ in element type: 'f32' vs 'i32'}}
  // expected-error @+1 {{'kiln.select' op failed to infer returned types}}
  %0 = kiln.select %c, %a, %b : tensor<2xi1>, tensor<2xf32>, tensor<2xi32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// select: the condition must broadcast with the values.
func.func @select_shapes_do_not_broadcast(%c: tensor<3xi1>, %a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{operand shapes do not broadcast}}
  // expected-error @+1 {{'kiln.select' op failed to infer returned types}}
  %0 = kiln.select %c, %a, %b : tensor<3xi1>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// cast may not change the shape (the Elementwise trait reports it).
func.func @cast_changes_shape(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{'kiln.cast' op all non-scalar operands/results must have the same shape and base type}}
  %0 = kiln.cast %x : tensor<2x3xf32> -> tensor<6xf16>
  return %0 : tensor<6xf16>
}

// -----

// matmul operands must share an element type.
func.func @matmul_element_types_differ(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{'kiln.matmul' op failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf16> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A bf16 matmul may return bf16 or f32 (f32 accumulation), nothing else.
func.func @matmul_low_precision_result(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>) -> tensor<2x4xf16> {
  // expected-error @+2 {{'kiln.matmul' op failed to infer returned types}}
  // expected-error @+1 {{'kiln.matmul' op inferred type(s) 'tensor<2x4xbf16>' are incompatible with return type(s) of operation 'tensor<2x4xf16>'}}
  %0 = kiln.matmul %a, %b : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xf16>
  return %0 : tensor<2x4xf16>
}

// -----

// Only bf16/f16 contractions may widen their result: not f32 to f64.
func.func @conv_widen_f32(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf64> {
  // expected-error @+2 {{'kiln.conv' op failed to infer returned types}}
  // expected-error @+1 {{'kiln.conv' op inferred type(s) 'tensor<1x4x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x4x6x6xf64>'}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf64>
  return %0 : tensor<1x4x6x6xf64>
}

// -----

// A conv bias has the result's element type (f32 with f32 accumulation).
func.func @conv_bias_element_type(%x: tensor<1x3x8x8xbf16>, %w: tensor<4x3x3x3xbf16>, %b: tensor<4xbf16>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'kiln.conv' op bias element type 'bf16' differs from the result's 'f32'}}
  %0 = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xbf16>, tensor<4x3x3x3xbf16>, tensor<4xbf16>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// So does a conv_transpose bias.
func.func @conv_transpose_bias_element_type(%x: tensor<1x2x3x3xf16>, %w: tensor<2x1x2x2xf16>, %b: tensor<1xf16>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{'kiln.conv_transpose' op bias element type 'f16' differs from the result's 'f32'}}
  %0 = kiln.conv_transpose %x, %w, %b {dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x3x3xf16>, tensor<2x1x2x2xf16>, tensor<1xf16>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

// matmul on a scalar.
func.func @matmul_scalar_operand(%a: tensor<f32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{operands must have rank >= 1}}
  // expected-error @+1 {{'kiln.matmul' op failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// matmul contraction dimensions must agree.
func.func @matmul_contraction_mismatch(%a: tensor<2x4xf32>, %b: tensor<5x6xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{contraction dimensions differ: 4 vs 5}}
  // expected-error @+1 {{'kiln.matmul' op failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<2x4xf32>, tensor<5x6xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// matmul batch dimensions must broadcast.
func.func @matmul_batch_mismatch(%a: tensor<2x3x4xf32>, %b: tensor<5x4x6xf32>) -> tensor<2x3x6xf32> {
  // expected-error @+2 {{batch dimensions do not broadcast}}
  // expected-error @+1 {{'kiln.matmul' op failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<2x3x4xf32>, tensor<5x4x6xf32> -> tensor<2x3x6xf32>
  return %0 : tensor<2x3x6xf32>
}

// -----

// conv needs 1 to 3 spatial dimensions.
func.func @conv_rank_too_small(%x: tensor<1x3xf32>, %w: tensor<4x3xf32>) -> tensor<1x4xf32> {
  // expected-error @+2 {{expects a 3-D to 5-D input (1 to 3 spatial dims), got 'tensor<1x3xf32>'}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64>, dilations = array<i64>, padding = array<i64>} : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

// conv filter and input ranks must match.
func.func @conv_filter_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{filter rank 3 differs from input rank 4}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv window attributes need one entry per spatial dimension.
func.func @conv_attr_lengths(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{expects 2 strides and dilations and 4 padding entries}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv strides must be positive.
func.func @conv_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{strides and dilations must be positive}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 0, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv padding must be non-negative.
func.func @conv_negative_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{padding must be non-negative}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: -1, 0, 1, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv groups must be positive.
func.func @conv_zero_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{groups must be positive}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv input and filter must share an element type.
func.func @conv_element_types_differ(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{input and filter element types differ}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv kernel larger than the padded input.
func.func @conv_window_too_large(%x: tensor<1x3x2x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x6xf32> {
  // expected-error @+2 {{window larger than padded input in spatial dim 0}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x2x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x6xf32>
  return %0 : tensor<1x4x1x6xf32>
}

// -----

// conv written result type disagrees with the inferred one.
func.func @conv_wrong_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+2 {{'kiln.conv' op inferred type(s) 'tensor<1x4x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x8xf32>'}}
  // expected-error @+1 {{'kiln.conv' op failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

// conv channels must divide by groups.
func.func @conv_groups_do_not_divide(%x: tensor<1x6x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'kiln.conv' op channels (6 in, 4 out) are not divisible by groups (3)}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 3 : i64} : (tensor<1x6x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv filter input channels must be input channels / groups.
func.func @conv_filter_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'kiln.conv' op filter has 4 input channels per group, expected 2}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv filter channels are read from the last dimension in nhwc.
func.func @conv_nhwc_filter_channels(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x4xf32>) -> tensor<1x6x6x4xf32> {
  // expected-error @+1 {{'kiln.conv' op filter has 4 input channels per group, expected 3}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, data_format = #kiln.data_format<nhwc>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x4xf32>) -> tensor<1x6x6x4xf32>
  return %0 : tensor<1x6x6x4xf32>
}

// -----

// conv bias must have one entry per output channel.
func.func @conv_bias_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'kiln.conv' op bias must be 1-D with 4 elements, got 'tensor<3xf32>'}}
  %0 = kiln.conv %x, %w, %b {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// conv_transpose shares the window checks with conv.
func.func @conv_transpose_attr_lengths(%x: tensor<1x16x8x8xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+2 {{expects 2 strides and dilations and 4 padding entries}}
  // expected-error @+1 {{'kiln.conv_transpose' op failed to infer returned types}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

// conv_transpose groups must be positive (checked before the channel rules).
func.func @conv_transpose_zero_groups(%x: tensor<1x16x8x8xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+2 {{groups must be positive}}
  // expected-error @+1 {{'kiln.conv_transpose' op failed to infer returned types}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>, groups = 0 : i64} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

// conv_transpose needs one output_padding entry per spatial dimension.
func.func @conv_transpose_output_padding(%x: tensor<1x16x8x8xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+2 {{expects 2 output_padding entries}}
  // expected-error @+1 {{'kiln.conv_transpose' op failed to infer returned types}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1>} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

// conv_transpose padding that removes the whole output.
func.func @conv_transpose_no_output(%x: tensor<1x16x1x1xf32>, %w: tensor<16x8x1x1xf32>) -> tensor<1x8x1x1xf32> {
  // expected-error @+2 {{padding leaves no output in spatial dim 0}}
  // expected-error @+1 {{'kiln.conv_transpose' op failed to infer returned types}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>, output_padding = array<i64: 0, 0>} : (tensor<1x16x1x1xf32>, tensor<16x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  return %0 : tensor<1x8x1x1xf32>
}

// -----

// conv_transpose filter dimension 0 must match the input channels.
func.func @conv_transpose_filter_channels(%x: tensor<1x16x8x8xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<1x8x15x15xf32> {
  // expected-error @+1 {{'kiln.conv_transpose' op filter has 8 input channels, input has 16}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x16x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x15x15xf32>
  return %0 : tensor<1x8x15x15xf32>
}

// -----

// conv_transpose input channels must divide by groups.
func.func @conv_transpose_groups(%x: tensor<1x6x4x4xf32>, %w: tensor<6x2x1x1xf32>) -> tensor<1x8x4x4xf32> {
  // expected-error @+1 {{'kiln.conv_transpose' op input channels are not divisible by groups}}
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, output_padding = array<i64: 0, 0>, groups = 4 : i64} : (tensor<1x6x4x4xf32>, tensor<6x2x1x1xf32>) -> tensor<1x8x4x4xf32>
  return %0 : tensor<1x8x4x4xf32>
}

// -----

// conv_transpose bias must have one entry per output channel.
func.func @conv_transpose_bias_shape(%x: tensor<1x16x8x8xf32>, %w: tensor<16x8x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x8x15x15xf32> {
  // expected-error @+1 {{'kiln.conv_transpose' op bias must be 1-D with 8 elements, got 'tensor<16xf32>'}}
  %0 = kiln.conv_transpose %x, %w, %b {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x8x15x15xf32>
  return %0 : tensor<1x8x15x15xf32>
}

// -----

// reduce axes must lie inside the rank.
func.func @reduce_axis_out_of_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.reduce' op failed to infer returned types}}
  %0 = kiln.reduce <sum> %x {axes = array<i64: 2>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// reduce axes are normalised (non-negative) by the importer.
func.func @reduce_negative_axis(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.reduce' op failed to infer returned types}}
  %0 = kiln.reduce <max> %x {axes = array<i64: -1>} : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// reduce axes must be sorted and unique.
func.func @reduce_axes_unsorted(%x: tensor<2x3xf32>) -> tensor<1x1xf32> {
  // expected-error @+1 {{'kiln.reduce' op axes must be sorted and unique}}
  %0 = kiln.reduce <sum> %x {axes = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<1x1xf32>
  return %0 : tensor<1x1xf32>
}

// -----

// reduce with keepdims = false drops the reduced axes.
func.func @reduce_wrong_result(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{'kiln.reduce' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  // expected-error @+1 {{'kiln.reduce' op failed to infer returned types}}
  %0 = kiln.reduce <sum> %x {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// argmax axis must lie in [-rank, rank).
func.func @argmax_axis_out_of_range(%x: tensor<4x10xf32>) -> tensor<4x1xi64> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.argmax' op failed to infer returned types}}
  %0 = kiln.argmax %x {axis = 2 : i64} : tensor<4x10xf32> -> tensor<4x1xi64>
  return %0 : tensor<4x1xi64>
}

// -----

// argmin axis must lie in [-rank, rank).
func.func @argmin_axis_out_of_range(%x: tensor<4x10xf32>) -> tensor<1x10xi64> {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.argmin' op failed to infer returned types}}
  %0 = kiln.argmin %x {axis = -3 : i64} : tensor<4x10xf32> -> tensor<1x10xi64>
  return %0 : tensor<1x10xi64>
}

// -----

// argmax yields i64 indices.
func.func @argmax_result_not_i64(%x: tensor<4x10xf32>) -> tensor<4x1xi32> {
  // expected-error @+1 {{'kiln.argmax' op result #0 must be ranked tensor of 64-bit signless integer values, but got 'tensor<4x1xi32>'}}
  %0 = kiln.argmax %x {axis = 1 : i64} : tensor<4x10xf32> -> tensor<4x1xi32>
  return %0 : tensor<4x1xi32>
}

// -----

// softmax axis must lie in [-rank, rank).
func.func @softmax_axis_out_of_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'kiln.softmax' op axis 2 is out of range for rank 2}}
  %0 = kiln.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// log_softmax axis must lie in [-rank, rank).
func.func @log_softmax_axis_out_of_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'kiln.log_softmax' op axis -3 is out of range for rank 2}}
  %0 = kiln.log_softmax %x {axis = -3 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// layer_norm axis must lie in [-rank, rank).
func.func @layer_norm_axis_out_of_range(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op axis 2 is out of range for rank 2}}
  %0 = kiln.layer_norm %x, %g {axis = 2 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// layer_norm scale must broadcast to the normalised dimensions.
func.func @layer_norm_scale_shape(%x: tensor<2x8xf32>, %g: tensor<4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op parameter 'tensor<4xf32>' does not broadcast to the normalised shape}}
  %0 = kiln.layer_norm %x, %g : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// layer_norm bias may not have more dimensions than are normalised.
func.func @layer_norm_bias_shape(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op parameter 'tensor<2x8xf32>' does not broadcast to the normalised shape}}
  %0 = kiln.layer_norm %x, %g, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// layer_norm keeps the input type.
func.func @layer_norm_result_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf16> {
  // expected-error @+1 {{'kiln.layer_norm' op failed to verify that all of {input, result} have same type}}
  %0 = kiln.layer_norm %x, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}

// -----

// batch_norm needs a channel dimension.
func.func @batch_norm_rank(%x: tensor<4xf32>, %p: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.batch_norm' op expects an input of rank >= 2}}
  %0 = kiln.batch_norm %x, %p, %p, %p, %p : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// batch_norm parameters are per channel (dimension 1 in nchw).
func.func @batch_norm_param_shape(%x: tensor<1x64x8x8xf32>, %p: tensor<64xf32>, %q: tensor<8xf32>) -> tensor<1x64x8x8xf32> {
  // expected-error @+1 {{'kiln.batch_norm' op expects per-channel parameters of shape [64], got 'tensor<8xf32>'}}
  %0 = kiln.batch_norm %x, %p, %p, %p, %q : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<8xf32>) -> tensor<1x64x8x8xf32>
  return %0 : tensor<1x64x8x8xf32>
}

// -----

// batch_norm in nhwc reads channels from the last dimension.
func.func @batch_norm_nhwc_param_shape(%x: tensor<1x8x8x64xf32>, %p: tensor<8xf32>) -> tensor<1x8x8x64xf32> {
  // expected-error @+1 {{'kiln.batch_norm' op expects per-channel parameters of shape [64], got 'tensor<8xf32>'}}
  %0 = kiln.batch_norm %x, %p, %p, %p, %p {data_format = #kiln.data_format<nhwc>} : (tensor<1x8x8x64xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x8x64xf32>
  return %0 : tensor<1x8x8x64xf32>
}

// -----

// instance_norm needs spatial dimensions.
func.func @instance_norm_rank(%x: tensor<2x8xf32>, %p: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.instance_norm' op expects an input of rank >= 3}}
  %0 = kiln.instance_norm %x, %p, %p : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// instance_norm parameters are per channel.
func.func @instance_norm_param_shape(%x: tensor<2x8x4x4xf32>, %p: tensor<8xf32>, %q: tensor<1x8xf32>) -> tensor<2x8x4x4xf32> {
  // expected-error @+1 {{'kiln.instance_norm' op expects per-channel parameters of shape [8], got 'tensor<1x8xf32>'}}
  %0 = kiln.instance_norm %x, %p, %q : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<2x8x4x4xf32>
  return %0 : tensor<2x8x4x4xf32>
}

// -----

// lrn window size must be positive.
func.func @lrn_size(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  // expected-error @+1 {{'kiln.lrn' op size must be positive}}
  %0 = kiln.lrn %x {size = 0 : i64} : tensor<1x8x4x4xf32>
  return %0 : tensor<1x8x4x4xf32>
}

// -----

// lrn needs spatial dimensions.
func.func @lrn_rank(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{'kiln.lrn' op expects an input of rank >= 3}}
  %0 = kiln.lrn %x {size = 3 : i64} : tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// pool needs spatial dimensions.
func.func @pool_rank(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+2 {{expects an input of rank >= 3}}
  // expected-error @+1 {{'kiln.pool' op failed to infer returned types}}
  %0 = kiln.pool <max> %x {kernel = array<i64>, strides = array<i64>, dilations = array<i64>, padding = array<i64>} : tensor<1x8xf32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// pool window attributes need one entry per spatial dimension.
func.func @pool_attr_lengths(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x2x2xf32> {
  // expected-error @+2 {{expects 2 kernel, stride and dilation entries and 4 padding entries}}
  // expected-error @+1 {{'kiln.pool' op failed to infer returned types}}
  %0 = kiln.pool <max> %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0>} : tensor<1x8x4x4xf32> -> tensor<1x8x2x2xf32>
  return %0 : tensor<1x8x2x2xf32>
}

// -----

// pool kernel must be positive.
func.func @pool_zero_kernel(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x2x2xf32> {
  // expected-error @+2 {{kernel, strides and dilations must be positive}}
  // expected-error @+1 {{'kiln.pool' op failed to infer returned types}}
  %0 = kiln.pool <avg> %x {kernel = array<i64: 0, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x8x4x4xf32> -> tensor<1x8x2x2xf32>
  return %0 : tensor<1x8x2x2xf32>
}

// -----

// pool kernel larger than the padded input.
func.func @pool_window_too_large(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x1x1xf32> {
  // expected-error @+2 {{window larger than padded input in spatial dim 1}}
  // expected-error @+1 {{'kiln.pool' op failed to infer returned types}}
  %0 = kiln.pool <max> %x {kernel = array<i64: 2, 5>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x8x4x4xf32> -> tensor<1x8x1x1xf32>
  return %0 : tensor<1x8x1x1xf32>
}

// -----

// pool padding must leave part of every window inside the input.
func.func @pool_padding_too_large(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x8x8xf32> {
  // expected-error @+1 {{'kiln.pool' op padding must be smaller than the dilated kernel extent (2) in spatial dim 0}}
  %0 = kiln.pool <max> %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 2, 2, 2, 2>} : tensor<1x8x4x4xf32> -> tensor<1x8x7x7xf32>
  return %0 : tensor<1x8x7x7xf32>
}

// -----

// global_pool needs spatial dimensions.
func.func @global_pool_rank(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+2 {{expects an input of rank >= 3}}
  // expected-error @+1 {{'kiln.global_pool' op failed to infer returned types}}
  %0 = kiln.global_pool <avg> %x : tensor<1x8xf32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// iota is 1-D.
func.func @iota_rank() -> tensor<2x2xi64> {
  // expected-error @+1 {{'kiln.iota' op expects a 1-D result, got 'tensor<2x2xi64>'}}
  %0 = kiln.iota {start = 0.0 : f64, step = 1.0 : f64} : tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{'kiln.reshape' op changes the element type}}
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return %0 : tensor<6xf16>
}

// -----

// reshape keeps the element count.
func.func @reshape_element_count(%x: tensor<2x3xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'kiln.reshape' op changes the element count from 6 to 8}}
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// transpose needs one permutation entry per dimension.
func.func @transpose_permutation_length(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{permutation has 3 entries for rank 2}}
  // expected-error @+1 {{'kiln.transpose' op failed to infer returned types}}
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0, 2>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// transpose permutation may not repeat a dimension.
func.func @transpose_not_a_permutation(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{permutation is not a permutation of [0, 2)}}
  // expected-error @+1 {{'kiln.transpose' op failed to infer returned types}}
  %0 = kiln.transpose %x {permutation = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// transpose permutation entries must be in range.
func.func @transpose_entry_out_of_range(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{permutation is not a permutation of [0, 2)}}
  // expected-error @+1 {{'kiln.transpose' op failed to infer returned types}}
  %0 = kiln.transpose %x {permutation = array<i64: 2, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// broadcast keeps the element type.
func.func @broadcast_element_type(%x: tensor<3xf32>) -> tensor<2x3xf16> {
  // expected-error @+1 {{'kiln.broadcast' op changes the element type}}
  %0 = kiln.broadcast %x : tensor<3xf32> -> tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

// broadcast only stretches size-1 dimensions.
func.func @broadcast_incompatible(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'kiln.broadcast' op cannot broadcast 'tensor<3xf32>' to 'tensor<2x4xf32>'}}
  %0 = kiln.broadcast %x : tensor<3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// broadcast cannot shrink a dimension.
func.func @broadcast_shrinks(%x: tensor<2x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+1 {{'kiln.broadcast' op cannot broadcast 'tensor<2x3xf32>' to 'tensor<1x3xf32>'}}
  %0 = kiln.broadcast %x : tensor<2x3xf32> -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

// broadcast cannot lower the rank.
func.func @broadcast_lowers_rank(%x: tensor<1x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.broadcast' op cannot broadcast 'tensor<1x3xf32>' to 'tensor<3xf32>'}}
  %0 = kiln.broadcast %x : tensor<1x3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// concat needs at least one input.
func.func @concat_no_inputs() -> tensor<0xf32> {
  // expected-error @+2 {{expects at least one input}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %0 = "kiln.concat"() <{axis = 0 : i64}> : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

// concat axis must lie inside the rank (it is normalised, non-negative).
func.func @concat_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{axis -2 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %0 = kiln.concat %a, %a {axis = -2 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// concat inputs share rank and element type.
func.func @concat_element_types_differ(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<4x3xf32> {
  // expected-error @+2 {{inputs differ in rank or element type}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %0 = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xf16> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// concat inputs share every dimension but the axis.
func.func @concat_dims_differ(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{inputs differ in dimension 1}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %0 = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// slice needs one start, limit and step per dimension.
func.func @slice_attr_lengths(%x: tensor<4x10xf32>) -> tensor<2x10xf32> {
  // expected-error @+2 {{expects 2 starts, limits and steps}}
  // expected-error @+1 {{'kiln.slice' op failed to infer returned types}}
  %0 = kiln.slice %x {starts = array<i64: 0>, limits = array<i64: 2, 10>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
  return %0 : tensor<2x10xf32>
}

// -----

// slice steps are non-zero.
func.func @slice_zero_step(%x: tensor<4x10xf32>) -> tensor<2x10xf32> {
  // expected-error @+2 {{step of dimension 1 is zero}}
  // expected-error @+1 {{'kiln.slice' op failed to infer returned types}}
  %0 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 10>, steps = array<i64: 1, 0>} : tensor<4x10xf32> -> tensor<2x10xf32>
  return %0 : tensor<2x10xf32>
}

// -----

// slice written result rank disagrees with the inferred one.
func.func @slice_wrong_result_rank(%x: tensor<4x10xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'kiln.slice' op inferred type(s) 'tensor<4x10xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'kiln.slice' op failed to infer returned types}}
  %0 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 4, 10>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// slice starts are clamped into range by the importer.
func.func @slice_start_out_of_range(%x: tensor<4x10xf32>) -> tensor<2x10xf32> {
  // expected-error @+1 {{'kiln.slice' op start -2 of dimension 0 is outside [0, 4)}}
  %0 = kiln.slice %x {starts = array<i64: -2, 0>, limits = array<i64: 0, 10>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
  return %0 : tensor<2x10xf32>
}

// -----

// slice limits are clamped into [-1, size] by the importer.
func.func @slice_limit_out_of_range(%x: tensor<4x10xf32>) -> tensor<4x12xf32> {
  // expected-error @+1 {{'kiln.slice' op limit 12 of dimension 1 is outside [-1, 10]}}
  %0 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 4, 12>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x12xf32>
  return %0 : tensor<4x12xf32>
}

// -----

// gather axis must lie inside the rank (it is normalised, non-negative).
func.func @gather_axis_out_of_range(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.gather' op failed to infer returned types}}
  %0 = kiln.gather %x, %i {axis = -1 : i64} : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// gather indices must be i32 or i64.
func.func @gather_float_indices(%x: tensor<4x8xf32>, %i: tensor<3xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'kiln.gather' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = kiln.gather %x, %i {axis = 0 : i64} : tensor<4x8xf32>, tensor<3xf32> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

// gather_elements axis must lie inside the rank.
func.func @gather_elements_axis(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.gather_elements' op failed to infer returned types}}
  %0 = kiln.gather_elements %x, %i {axis = 2 : i64} : tensor<3x4xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// gather_elements indices have the input's rank.
func.func @gather_elements_indices_rank(%x: tensor<3x4xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+2 {{indices rank 1 differs from input rank 2}}
  // expected-error @+1 {{'kiln.gather_elements' op failed to infer returned types}}
  %0 = kiln.gather_elements %x, %i {axis = 1 : i64} : tensor<3x4xf32>, tensor<2xi64> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// scatter_elements axis must lie inside the rank.
func.func @scatter_elements_axis(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.scatter_elements' op failed to infer returned types}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = -1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// scatter_elements indices have the input's rank.
func.func @scatter_elements_indices_rank(%x: tensor<3x4xf32>, %i: tensor<6xi64>, %u: tensor<6xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{indices rank 1 differs from input rank 2}}
  // expected-error @+1 {{'kiln.scatter_elements' op failed to infer returned types}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x4xf32>, tensor<6xi64>, tensor<6xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// scatter_elements updates have the indices' shape.
func.func @scatter_elements_updates_shape(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x3xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{updates must have the indices' shape and the input's element type}}
  // expected-error @+1 {{'kiln.scatter_elements' op failed to infer returned types}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x3xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// scatter_elements updates have the input's element type.
func.func @scatter_elements_updates_type(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf16>) -> tensor<3x4xf32> {
  // expected-error @+2 {{updates must have the indices' shape and the input's element type}}
  // expected-error @+1 {{'kiln.scatter_elements' op failed to infer returned types}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf16> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// pad needs one low and one high pad per dimension.
func.func @pad_attr_lengths(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{expects 2 low and high pads}}
  // expected-error @+1 {{'kiln.pad' op failed to infer returned types}}
  %0 = kiln.pad <constant> %x {low = array<i64: 1>, high = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// pad amounts are non-negative.
func.func @pad_negative(%x: tensor<2x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+2 {{pads must be non-negative}}
  // expected-error @+1 {{'kiln.pad' op failed to infer returned types}}
  %0 = kiln.pad <constant> %x {low = array<i64: -1, 0>, high = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

// reflect padding must be smaller than the dimension.
func.func @pad_reflect_too_large(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'kiln.pad' op reflect padding of dimension 1 must be smaller than its size 3}}
  %0 = kiln.pad <reflect> %x {low = array<i64: 0, 3>, high = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// edge padding needs an element to repeat.
func.func @pad_edge_empty(%x: tensor<2x0xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'kiln.pad' op edge padding of an empty dimension}}
  %0 = kiln.pad <edge> %x {low = array<i64: 0, 1>, high = array<i64: 0, 1>} : tensor<2x0xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// split axis must lie inside the rank.
func.func @split_axis(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'kiln.split' op failed to infer returned types}}
  %0 = kiln.split %x {axis = 2 : i64, sizes = array<i64: 6>} : tensor<4x6xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// split sizes are non-negative.
func.func @split_negative_size(%x: tensor<4x6xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-error @+2 {{split sizes must be non-negative}}
  // expected-error @+1 {{'kiln.split' op failed to infer returned types}}
  %0:2 = "kiln.split"(%x) <{axis = 1 : i64, sizes = array<i64: 8, -2>}> : (tensor<4x6xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// split sizes must add up to the axis extent.
func.func @split_sizes_sum(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  // expected-error @+2 {{split sizes sum to 4, not 6}}
  // expected-error @+1 {{'kiln.split' op failed to infer returned types}}
  %0:2 = kiln.split %x {axis = 1 : i64, sizes = array<i64: 2, 2>} : tensor<4x6xf32> -> tensor<4x2xf32>, tensor<4x2xf32>
  return %0#0, %0#1 : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// split into zero pieces (of an empty axis).
func.func @split_no_pieces(%x: tensor<4x0xf32>) {
  // expected-error @+1 {{'kiln.split' op expects at least one piece}}
  "kiln.split"(%x) <{axis = 1 : i64, sizes = array<i64>}> : (tensor<4x0xf32>) -> ()
  return
}

// -----

// tile needs one repeat per dimension.
func.func @tile_attr_length(%x: tensor<3x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+2 {{expects 2 repeats}}
  // expected-error @+1 {{'kiln.tile' op failed to infer returned types}}
  %0 = kiln.tile %x {repeats = array<i64: 2>} : tensor<3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// tile repeats are non-negative.
func.func @tile_negative(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{repeats must be non-negative}}
  // expected-error @+1 {{'kiln.tile' op failed to infer returned types}}
  %0 = kiln.tile %x {repeats = array<i64: 1, -1>} : tensor<3x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// resize keeps the rank.
func.func @resize_rank(%x: tensor<1x4x8x8xf32>) -> tensor<4x16x16xf32> {
  // expected-error @+1 {{'kiln.resize' op must keep rank and element type}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>} : tensor<1x4x8x8xf32> -> tensor<4x16x16xf32>
  return %0 : tensor<4x16x16xf32>
}

// -----

// resize keeps the element type.
func.func @resize_element_type(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x16x16xf16> {
  // expected-error @+1 {{'kiln.resize' op must keep rank and element type}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf16>
  return %0 : tensor<1x4x16x16xf16>
}

// -----

// resize scales: one per dimension or none.
func.func @resize_scales_length(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x16x16xf32> {
  // expected-error @+1 {{'kiln.resize' op expects 4 scales or none}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return %0 : tensor<1x4x16x16xf32>
}

// -----

// resize: run-time scales need value_axes.
func.func @resize_runtime_no_axes(%x: tensor<1x4x8x8xf32>, %s: tensor<2xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op value_axes is required by and only taken with runtime scales or roi}}
  %0 = kiln.resize %x scales(%s : tensor<2xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize: one run-time scale per value axis.
func.func @resize_runtime_length(%x: tensor<1x4x8x8xf32>, %s: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op expects runtime_scales of 2 values (1-D), got 'tensor<4xf32>'}}
  %0 = kiln.resize %x scales(%s : tensor<4xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 2, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize: a dimension no run-time scale covers keeps its size.
func.func @resize_runtime_uncovered(%x: tensor<1x4x8x8xf32>, %s: tensor<1xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op dimension 2 changes size but no runtime scale covers it}}
  %0 = kiln.resize %x scales(%s : tensor<1xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize: value_axes are distinct dimensions.
func.func @resize_runtime_axes(%x: tensor<1x4x8x8xf32>, %s: tensor<2xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op value_axes must be distinct dimensions of the input, got 3}}
  %0 = kiln.resize %x scales(%s : tensor<2xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 3, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize: run-time scales replace the scales attribute.
func.func @resize_runtime_both(%x: tensor<1x4x8x8xf32>, %s: tensor<2xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op takes runtime scales or the scales attribute, not both}}
  %0 = kiln.resize %x scales(%s : tensor<2xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64: 1.0, 1.0, 0.5, 0.5>, value_axes = array<i64: 2, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize: a run-time region is tf_crop_and_resize's.
func.func @resize_runtime_roi_mode(%x: tensor<1x4x8x8xf32>, %r: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+1 {{'kiln.resize' op runtime_roi is taken by the tf_crop_and_resize coordinate mode only}}
  %0 = kiln.resize %x roi(%r : tensor<4xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 2, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// resize scales are positive.
func.func @resize_scales_positive(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x16x16xf32> {
  // expected-error @+1 {{'kiln.resize' op scales must be positive}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64: 1.0, 1.0, 2.0, 0.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return %0 : tensor<1x4x16x16xf32>
}

// -----

// ODS: float-only unary ops reject integer tensors.
func.func @exp_on_integers(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kiln.exp' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<4xi32>'}}
  %0 = kiln.exp %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// ODS: not takes bool tensors only.
func.func @not_on_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.not' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = kiln.not %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// ODS: logical binary ops take bool tensors only.
func.func @and_on_integers(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kiln.and' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xi32>'}}
  %0 = kiln.and %x, %x : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// ODS: kiln ops work on ranked tensors only.
func.func @add_unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'kiln.add' op operand #0 must be ranked tensor of floating-point or integer values, but got 'tensor<*xf32>'}}
  %0 = "kiln.add"(%x, %x) : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// ODS: select's condition is a bool tensor.
func.func @select_condition_not_bool(%c: tensor<2xi32>, %a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'kiln.select' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<2xi32>'}}
  %0 = kiln.select %c, %a, %a : tensor<2xi32>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// ODS: conv works on float tensors.
func.func @conv_on_integers(%x: tensor<1x3x8x8xi8>, %w: tensor<4x3x3x3xi8>) -> tensor<1x4x6x6xi8> {
  // expected-error @+1 {{'kiln.conv' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<1x3x8x8xi8>'}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xi8>, tensor<4x3x3x3xi8>) -> tensor<1x4x6x6xi8>
  return %0 : tensor<1x4x6x6xi8>
}

// -----

// ODS: conv requires its window attributes.
func.func @conv_missing_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'kiln.conv' op requires attribute 'strides'}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// ODS: softmax keeps the input type.
func.func @softmax_type_mismatch(%x: tensor<2x3xf32>) -> tensor<2x3xf16> {
  // expected-error @+1 {{'kiln.softmax' op requires the same type for all operands and results}}
  %0 = "kiln.softmax"(%x) <{axis = 1 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

// ODS: constant's value and result types match.
func.func @constant_type_mismatch() -> tensor<2xi32> {
  // expected-error @+1 {{'kiln.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "kiln.constant"() <{value = dense<[1, 2]> : tensor<2xi64>}> : () -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

// An unknown enum keyword is rejected by the parser.
func.func @reduce_unknown_kind(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{expected ::kiln::ReduceKind to be one of: sum, mean, max, min, prod}}
  // expected-error @+1 {{failed to parse Kiln_ReduceKindAttr parameter 'value' which is to be a `::kiln::ReduceKind`}}
  %0 = kiln.reduce <median> %x {axes = array<i64: 1>} : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// fusion: results of different shapes have no single iteration space.
func.func @fusion_shapes_differ(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'kiln.fusion' op results must share one shape (the kernel's iteration space), got 'tensor<2x3xf32>' and 'tensor<6xf32>'}}
  %0:2 = kiln.fusion "elementwise" -> tensor<2x3xf32>, tensor<6xf32> {
    %r = kiln.relu %x : tensor<2x3xf32>
    %f = kiln.reshape %r : tensor<2x3xf32> -> tensor<6xf32>
    kiln.yield %r, %f : tensor<2x3xf32>, tensor<6xf32>
  }
  return %0#0 : tensor<2x3xf32>
}

// -----

// fusion: the yield must match the results.
func.func @fusion_yield_mismatch(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'kiln.fusion' op yields 'tensor<2x3xf32>' but its results are 'tensor<2x3xf16>'}}
  %0 = kiln.fusion "elementwise" -> tensor<2x3xf16> {
    %r = kiln.relu %x : tensor<2x3xf32>
    kiln.yield %r : tensor<2x3xf32>
  }
  return %x : tensor<2x3xf32>
}

// -----

// fusion: a kernel's body has no side effects of its own.
func.func @fusion_side_effect(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<2x3xf32> {
    // expected-error @+1 {{'memref.alloc' op cannot be part of a kiln.fusion region: it has side effects}}
    %m = memref.alloc() : memref<4xf32>
    kiln.yield %x : tensor<2x3xf32>
  }
  return %0 : tensor<2x3xf32>
}

// -----

func.func @resize_exclude_outside_not_cubic(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32> {
  // expected-error @+1 {{'kiln.resize' op cubic_coeff_a and exclude_outside apply to cubic mode only}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, exclude_outside, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x8x8xf32>
  return %0 : tensor<1x1x8x8xf32>
}

// -----

func.func @resize_coeff_not_cubic(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32> {
  // expected-error @+1 {{'kiln.resize' op cubic_coeff_a and exclude_outside apply to cubic mode only}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<nearest>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, cubic_coeff_a = -0.5 : f64, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x8x8xf32>
  return %0 : tensor<1x1x8x8xf32>
}

// -----

func.func @resize_crop_without_roi(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'kiln.resize' op roi is required by and only taken by the tf_crop_and_resize coordinate mode}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @resize_roi_not_crop(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'kiln.resize' op roi is required by and only taken by the tf_crop_and_resize coordinate mode}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, roi = array<f64: 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @resize_extrapolation_not_crop(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'kiln.resize' op extrapolation_value applies to tf_crop_and_resize only}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, extrapolation_value = 1.0 : f64, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @resize_roi_length(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'kiln.resize' op expects 8 roi values (a start and an end per dimension), got 4}}
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, roi = array<f64: 0.0, 0.0, 1.0, 1.0>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_grid_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{'kiln.call_kernel' op grid and block must have 3 dimensions each}}
  %y = kiln.call_kernel @k::@k ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) grid [1, 1] block [4, 1, 1] -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_empty_block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{'kiln.call_kernel' op grid and block dimensions must be positive}}
  %y = kiln.call_kernel @k::@k ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) grid [1, 1, 1] block [0, 1, 1] -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_mixed(%x: tensor<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kiln.call_kernel' op operands must be all ranked tensors or all memrefs}}
  kiln.call_kernel @k::@k ins(%x : tensor<4xf32>) outs(%y : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1]
  return
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{'kiln.call_kernel' op results 'tensor<4xf16>' must match the outputs' types 'tensor<4xf32>'}}
  %y = kiln.call_kernel @k::@k ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) grid [1, 1, 1] block [4, 1, 1] -> tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_float_scalar(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kiln.call_kernel' op scalars must be i32 or i64 integers, got 1.000000e+00 : f32}}
  kiln.call_kernel @k::@k ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1] scalars [1.0 : f32]
  return
}

// -----

func.func private @not_a_binary()
func.func @call_kernel_symbol(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kiln.call_kernel' op kernel @not_a_binary::@k does not name a gpu.binary}}
  kiln.call_kernel @not_a_binary::@k ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1]
  return
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_no_entry(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kiln.call_kernel' op kernel must be @binary::@entry, got @k}}
  kiln.call_kernel @k ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1]
  return
}

// -----

gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @call_kernel_pointer_order(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kiln.call_kernel' op pointer_order must be a permutation of the 2 operand indices}}
  kiln.call_kernel @k::@k ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1] {pointer_order = array<i32: 1, 1>}
  return
}

// -----

// philox: the key is two words.
func.func @philox_key_shape(%key: tensor<3xi32>, %counter: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kiln.philox' op expects a tensor<2xi32> key, got 'tensor<3xi32>'}}
  %0 = kiln.philox %key, %counter : tensor<3xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// philox: the counter is four words.
func.func @philox_counter_shape(%key: tensor<2xi32>, %counter: tensor<2xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kiln.philox' op expects a tensor<4xi32> counter, got 'tensor<2xi32>'}}
  %0 = kiln.philox %key, %counter : tensor<2xi32>, tensor<2xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// philox: the result shape is static (the element index is the counter).
func.func @philox_dynamic(%key: tensor<2xi32>, %counter: tensor<4xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'kiln.philox' op expects a static result shape, got 'tensor<?xi32>'}}
  %0 = kiln.philox %key, %counter : tensor<2xi32>, tensor<4xi32> -> tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// dropout_mask: ratio 1 would divide by zero.
func.func @dropout_mask_ratio(%key: tensor<2xi32>, %counter: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.dropout_mask' op ratio must be in [0, 1), got 1}}
  %0 = kiln.dropout_mask %key, %counter {ratio = 1.0 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// dropout: ratio 0 is the identity; the importer never makes it.
func.func @dropout_ratio(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.dropout' op ratio must be in (0, 1), got 0}}
  %0 = kiln.dropout %x {ratio = 0.0 : f32} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// gradient: needs at least one x (the generic form: the custom syntax
// cannot write none).
func.func @gradient_no_xs(%y: tensor<f32>) {
  // expected-error @+2 {{kiln.gradient needs at least one x}}
  // expected-error @+1 {{failed to infer returned types}}
  "kiln.gradient"(%y) : (tensor<f32>) -> ()
  return
}

// -----

// gradient: an x of unknown shape has no zeros to fall back on.
func.func @gradient_dynamic(%y: tensor<f32>, %x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'kiln.gradient' op x #0 has no static shape: 'tensor<?xf32>'}}
  %g = kiln.gradient %y wrt %x : tensor<f32> wrt tensor<?xf32>
  return %g : tensor<?xf32>
}

// -----

// gradient: integer tensors are not differentiated.
func.func @gradient_int(%y: tensor<f32>, %x: tensor<3xi64>) -> tensor<3xi64> {
  // expected-error @+1 {{operand #1 must be variadic of ranked tensor of floating-point values}}
  %g = kiln.gradient %y wrt %x : tensor<f32> wrt tensor<3xi64>
  return %g : tensor<3xi64>
}

// -----

// gradient: expanded before fusion, so never inside a region.
func.func @gradient_in_fusion(%y: tensor<f32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r = kiln.fusion "elementwise" -> tensor<3xf32> {
    // expected-error @+1 {{'kiln.gradient' op cannot be inside a kiln.fusion (kiln-expand-gradients runs before kiln-fuse)}}
    %g = kiln.gradient %y wrt %x : tensor<f32> wrt tensor<3xf32>
    kiln.yield %g : tensor<3xf32>
  }
  return %r : tensor<3xf32>
}

// -----

// bitwise ops take integers only.
func.func @bitwise_and_float(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.bitwise_and' op operand #0 must be ranked tensor of integer values}}
  %0 = kiln.bitwise_and %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// cumsum's axis lies inside the rank.
func.func @cumsum_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'kiln.cumsum' op axis 2 is out of range for rank 2}}
  %0 = kiln.cumsum %x {axis = 2 : i64} : tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// top_k's k fits the axis.
func.func @top_k_too_many(%x: tensor<2x5xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{k 6 must be in [0, 5], the extent of axis 1}}
  // expected-error @+1 {{'kiln.top_k' op failed to infer returned types}}
  %v, %i = kiln.top_k %x {axis = 1 : i64, k = 6 : i64} : tensor<2x5xf32> -> tensor<2x6xf32>, tensor<2x6xi64>
  return %v : tensor<2x6xf32>
}

// -----

// gather_nd's index tuples fit the input.
func.func @gather_nd_long_tuple(%x: tensor<2x2xf32>, %i: tensor<3x3xi64>) -> tensor<3xf32> {
  // expected-error @+2 {{index tuples of length 3 do not fit an input of rank 2 after 0 batch dimensions}}
  // expected-error @+1 {{'kiln.gather_nd' op failed to infer returned types}}
  %0 = kiln.gather_nd %x, %i : tensor<2x2xf32>, tensor<3x3xi64> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// gather_nd's batch dimensions agree with the input's.
func.func @gather_nd_batch(%x: tensor<2x2x2xf32>, %i: tensor<3x1xi64>) -> tensor<3x2xf32> {
  // expected-error @+2 {{batch dimension 0 of indices (3) differs from the input's (2)}}
  // expected-error @+1 {{'kiln.gather_nd' op failed to infer returned types}}
  %0 = kiln.gather_nd %x, %i {batch_dims = 1 : i64} : tensor<2x2x2xf32>, tensor<3x1xi64> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// scatter_nd's updates have shape indices.shape[:-1] + input.shape[q:].
func.func @scatter_nd_updates(%x: tensor<4x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{updates must have shape indices.shape[:-1] + input.shape[q:] ('tensor<2x4xf32>') and the input's element type, got 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'kiln.scatter_nd' op failed to infer returned types}}
  %0 = kiln.scatter_nd %x, %i, %u : tensor<4x4xf32>, tensor<2x1xi64>, tensor<2x3xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// recurrence: R's rows are not G * H.
func.func @recurrence_gate_rows(%x: tensor<5x3x16xf32>, %r: tensor<12x4xf32>,
                                %h: tensor<3x4xf32>, %c: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op a lstm cell has 4 gates: recurrence must be [16, 4] and input_projection [5, 3, 16] (got [12, 4] and [5, 3, 16])}}
  %y, %yh, %yc = kiln.recurrence <lstm> %x, %r, %h initial_c(%c)
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>}
      : (tensor<5x3x16xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

// recurrence: an lstm needs its cell state in and out.
func.func @recurrence_lstm_without_c(%x: tensor<5x3x16xf32>,
                                     %r: tensor<16x4xf32>, %h: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op initial_c and last_c are there exactly for lstm}}
  %y, %yh = kiln.recurrence <lstm> %x, %r, %h
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>}
      : (tensor<5x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

// recurrence: a gru takes two activations.
func.func @recurrence_activation_count(%x: tensor<5x3x12xf32>,
                                       %r: tensor<12x4xf32>, %h: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op a gru cell takes 2 activations, each with an alpha and a beta (got 3, 3 and 3)}}
  %y, %yh = kiln.recurrence <gru> %x, %r, %h
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>}
      : (tensor<5x3x12xf32>, tensor<12x4xf32>, tensor<3x4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

// recurrence: an activation ONNX does not allow.
func.func @recurrence_unknown_activation(%x: tensor<5x3x4xf32>,
                                         %r: tensor<4x4xf32>, %h: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op unknown activation 'gelu'}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h
      {activations = ["gelu"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>}
      : (tensor<5x3x4xf32>, tensor<4x4xf32>, tensor<3x4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

// recurrence: peepholes belong to lstm, reset_bias to gru with
// linear_before_reset, clip must be positive, shapes static.
func.func @recurrence_peepholes_on_rnn(%x: tensor<5x3x4xf32>, %r: tensor<4x4xf32>,
                                       %h: tensor<3x4xf32>, %p: tensor<12xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op peepholes and input_forget are lstm's}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h peepholes(%p)
      {activations = ["tanh"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>}
      : (tensor<5x3x4xf32>, tensor<4x4xf32>, tensor<3x4xf32>, tensor<12xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @recurrence_reset_bias_without_lbr(%x: tensor<5x3x12xf32>,
    %r: tensor<12x4xf32>, %h: tensor<3x4xf32>, %rb: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op reset_bias needs linear_before_reset}}
  %y, %yh = kiln.recurrence <gru> %x, %r, %h reset_bias(%rb)
      {activations = ["sigmoid", "tanh"], activation_alpha = array<f32: 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0>}
      : (tensor<5x3x12xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @recurrence_clip_zero(%x: tensor<5x3x4xf32>, %r: tensor<4x4xf32>,
                                %h: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op clip must be positive (got 0}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h
      {activations = ["tanh"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>, clip = 0.0 : f32}
      : (tensor<5x3x4xf32>, tensor<4x4xf32>, tensor<3x4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @recurrence_dynamic(%x: tensor<?x3x4xf32>, %r: tensor<4x4xf32>,
                              %h: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op needs static shapes (got input_projection [?, 3, 4], recurrence [4, 4])}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h
      {activations = ["tanh"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>}
      : (tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<3x4xf32>)
      -> (tensor<?x3x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @recurrence_initial_h_shape(%x: tensor<5x3x4xf32>, %r: tensor<4x4xf32>,
                                      %h: tensor<4x3xf32>) {
  // expected-error @+1 {{'kiln.recurrence' op initial_h must be [3, 4] (got [4, 3])}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h
      {activations = ["tanh"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>}
      : (tensor<5x3x4xf32>, tensor<4x4xf32>, tensor<4x3xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return
}
