// Input of kiln-augment.mlir (the NHWC case).
// NHWC with a named input and per-channel normalisation; the 4-D check
// reads the channels from the last dimension.
module {
  func.func @main(%img: tensor<2x4x4x3xf32> {kiln.name = "img"}) -> (tensor<2x4x4x3xf32> {kiln.name = "y"}) {
    %y = kiln.relu %img : tensor<2x4x4x3xf32>
    return %y : tensor<2x4x4x3xf32>
  }
  func.func @train_grad(%img: tensor<2x4x4x3xf32> {kiln.name = "img"}) -> (tensor<2x4x4x3xf32>) {
    %y = kiln.relu %img : tensor<2x4x4x3xf32>
    return %y : tensor<2x4x4x3xf32>
  }
}
