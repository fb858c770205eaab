// The loss options of kiln-autodiff: class losses, loss-output, freeze, and
// their errors.
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4:i64" | FileCheck %s --check-prefix=CE
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=nll labels=lab:4:int64 freeze=w2" | FileCheck %s --check-prefix=FREEZE
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4:i64 rematerialize=false" | FileCheck %s --check-prefix=NOREMAT
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4:i64 loss-seed-argument=true" | FileCheck %s --check-prefix=SEED
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss-output=y" 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss-output=y loss=mse" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4:i64 freeze=w.*" 2>&1 | FileCheck %s --check-prefix=ALLFROZEN
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=hinge labels=lab:4:i64" 2>&1 | FileCheck %s --check-prefix=BADLOSS
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4" 2>&1 | FileCheck %s --check-prefix=BADLABELS
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:5:i64" 2>&1 | FileCheck %s --check-prefix=LABELSHAPE
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy" 2>&1 | FileCheck %s --check-prefix=NOLABELS
// RUN: not kiln-opt %s -split-input-file -kiln-autodiff="loss=cross_entropy labels=lab:4:i64 loss-on=z" 2>&1 | FileCheck %s --check-prefix=NOOUTPUT

// cross_entropy: log_softmax over the classes, a one-hot mask of the
// labels, the negative mean over the batch: -classes times the mean over
// batch and classes (a mean, which kilnc --dim scales by max / n).
// CE-LABEL: func.func @train_grad(
// CE-SAME:    %{{.*}}: tensor<4xi64> {kiln.name = "lab"}
// CE-NOT:   func.func
// CE:         kiln.iota {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<10xi64>
// CE:         kiln.equal
// CE:         kiln.log_softmax %{{.*}} {axis = 1 : i64}
// CE:         kiln.reduce <mean> %{{.*}} {axes = array<i64: 0, 1>, keepdims = false}
// CE:         kiln.constant dense<-1.000000e+01> : tensor<f32>
// loss-seed-argument: a last tensor<f32> argument seeds the reverse sweep
// (the loss's 1/(N C) times -C times it), the loss itself is not scaled.
// SEED-LABEL: func.func @train_grad(
// SEED-SAME:    %{{.*}}: tensor<4xi64> {kiln.name = "lab"}, %[[SEED:[a-z0-9]+]]: tensor<f32> {kiln.loss_seed, kiln.name = "loss_seed"})
// SEED:         %[[LOSS:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
// SEED:         kiln.mul %[[SEED]], %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
// SEED:         return %[[LOSS]],
// Without rematerialisation the relu's output is kept for dW2.
// NOREMAT: kiln.remat_report = {kept = 4 : i64, kept_bytes = 832 : i64, recomputed = 0 : i64, recomputed_bytes = 0 : i64}
// NOREMAT-NOT: kiln.recomputed
// FREEZE-LABEL: func.func @train_grad(
// FREEZE-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<8x16xf32> {kiln.name = "grad.w1"})
// FREEZE-SAME:    attributes {kiln.gradients = [@w1]}
// FREEZE-NOT:   kiln.log_softmax
// NOTSCALAR: error: kiln-autodiff: the loss 'y' must be a float scalar, got 'tensor<4x10xf32>'
// BOTH: error: kiln-autodiff: loss-output names a loss the model computes; it takes no loss or labels
// ALLFROZEN: error: kiln-autodiff: no trainable weights (no float initializer outside freeze)
// BADLOSS: error: kiln-autodiff: loss 'hinge' is not one of cross_entropy, nll, mse, l1 (or give loss-output)
// BADLABELS: error: kiln-autodiff: labels 'lab:4' is not NAME:SHAPE:DTYPE
// LABELSHAPE: error: kiln-autodiff: loss 'cross_entropy' on 'y': class labels must have the output's shape without the class dimension, [4], got [5] i64
// NOLABELS: error: kiln-autodiff: loss 'cross_entropy' needs labels=NAME:SHAPE:DTYPE
// NOOUTPUT: error: kiln-autodiff: loss-on 'z' is not an output of the model (outputs: y)
module {
  ml_program.global private @w1(dense<0.5> : tensor<8x16xf32>) : tensor<8x16xf32> {kiln.origin = "initializer f32 8x16 w1"}
  ml_program.global private @w2(dense<0.25> : tensor<16x10xf32>) : tensor<16x10xf32> {kiln.origin = "initializer f32 16x10 w2"}
  func.func @main(%x: tensor<4x8xf32> {kiln.name = "x"}) -> (tensor<4x10xf32> {kiln.name = "y"}) {
    %w1 = ml_program.global_load_const @w1 : tensor<8x16xf32>
    %w2 = ml_program.global_load_const @w2 : tensor<16x10xf32>
    %h = kiln.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %r = kiln.relu %h : tensor<4x16xf32>
    %y = kiln.matmul %r, %w2 : tensor<4x16xf32>, tensor<16x10xf32> -> tensor<4x10xf32>
    return %y : tensor<4x10xf32>
  }
}
