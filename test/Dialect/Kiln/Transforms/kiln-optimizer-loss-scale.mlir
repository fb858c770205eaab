// kiln-optimizer's loss scaling (mixed precision): the backward's seed
// argument becomes the loss_scale state, the gradients are unscaled, one
// reduction decides whether they are finite, and a non-finite step keeps
// every state but the scale.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum lr=0.5 loss-scale=dynamic loss-scale-init=1024 loss-scale-growth-interval=3})" | FileCheck %s --check-prefix=DYN
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd grad-clip=1.0 loss-scale=static loss-scale-init=128})" | FileCheck %s --check-prefix=STATIC
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd})" | FileCheck %s --check-prefix=NONE

// Bad options: one line, non-zero exit.
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{loss-scale=auto})" 2>&1 | FileCheck %s --check-prefix=BADKIND
// BADKIND: error: kiln-optimizer: unknown loss-scale 'auto' (none, dynamic, static)
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{loss-scale=dynamic loss-scale-init=0})" 2>&1 | FileCheck %s --check-prefix=BADINIT
// BADINIT: error: kiln-optimizer: loss-scale-init must be a positive finite number (loss-scale-init=0.000000e+00)
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{loss-scale=dynamic loss-scale-growth-interval=0})" 2>&1 | FileCheck %s --check-prefix=BADGROWTH
// BADGROWTH: error: kiln-optimizer: loss-scale-growth-interval must be in [1, 2^24] (loss-scale-growth-interval=0)
// A @train_grad without the seed argument cannot be scaled.
// RUN: not kiln-opt %S/kiln-optimizer.mlir -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{loss-scale=dynamic})" 2>&1 | FileCheck %s --check-prefix=NOSEED
// NOSEED: error: kiln-optimizer: loss-scale=dynamic needs a @train_grad whose backward is seeded from an argument (kiln.loss_seed: kiln-autodiff loss-seed-argument)

// Dynamic: state params, opt.m, opt.step, loss_scale (initially 1024),
// loss_scale.good_steps; the seed argument is gone; results end with the
// skipped flag.
// DYN-LABEL: func.func @train_step(
// DYN-SAME:    %[[X:[a-z0-9]+]]: tensor<4x2xf32> {kiln.name = "x"}, %{{.*}}: tensor<4x3xf32> {kiln.name = "labels"},
// DYN-SAME:    %[[P:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.params", kiln.state = "params"},
// DYN-SAME:    %[[M:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.opt.m", kiln.state = "opt.m"},
// DYN-SAME:    %[[T:[a-z0-9]+]]: tensor<f32> {kiln.name = "kiln.state.opt.step", kiln.state = "opt.step"},
// DYN-SAME:    %[[S:[a-z0-9]+]]: tensor<f32> {kiln.initial = dense<1.024000e+03> : tensor<f32>, kiln.name = "kiln.state.loss_scale", kiln.state = "loss_scale"},
// DYN-SAME:    %[[G:[a-z0-9]+]]: tensor<f32> {kiln.name = "kiln.state.loss_scale.good_steps", kiln.state = "loss_scale.good_steps"})
// DYN-SAME:    tensor<f32> {kiln.name = "skipped"})
// The seed is the scale.
// DYN:         %[[SEEDED:.*]] = kiln.mul %{{.*}}, %[[S]]
// Unscale, one reduction, the finite test.
// DYN:         %[[INV:.*]] = kiln.div %{{.*}}, %[[S]]
// DYN:         %[[U:.*]] = kiln.mul %{{.*}}, %[[INV]] : tensor<6xf32>, tensor<f32>
// DYN:         %[[SQ:.*]] = kiln.mul %[[U]], %[[U]]
// DYN:         %[[SUM:.*]] = kiln.reduce <sum> %[[SQ]]
// DYN:         %[[ABS:.*]] = kiln.abs %[[SUM]]
// DYN:         %[[FIN:.*]] = kiln.less_equal %[[ABS]]
// DYN-NOT:     kiln.reduce
// The update reads the unscaled gradient; each state is kept on a skip.
// DYN:         %[[BUF:.*]] = kiln.add %{{.*}}, %[[U]]
// DYN:         %[[NP:.*]] = kiln.select %[[FIN]], %{{.*}}, %[[P]]
// DYN:         %[[NM:.*]] = kiln.select %[[FIN]], %[[BUF]], %[[M]]
// DYN:         %[[NT:.*]] = kiln.select %[[FIN]], %{{.*}}, %[[T]]
// Growth after 3 finite steps, halving on a skip.
// DYN:         kiln.constant dense<3.000000e+00>
// DYN:         %[[GROW:.*]] = kiln.greater_equal
// DYN:         %[[DOUBLE:.*]] = kiln.mul %[[S]], %{{.*}}
// DYN:         %[[HALF:.*]] = kiln.mul %[[S]], %{{.*}}
// DYN:         %[[NS:.*]] = kiln.select %[[FIN]], %{{.*}}, %[[HALF]]
// DYN:         %[[NG:.*]] = kiln.select %[[FIN]], %{{.*}}, %{{.*}}
// DYN:         %[[SKIP:.*]] = kiln.select %[[FIN]]
// DYN:         return %{{.*}}, %[[NP]], %[[NM]], %[[NT]], %[[NS]], %[[NG]], %[[SKIP]]

// Static: one scale state, no counter; clipping reuses the finite test's
// reduction (one reduce in all).
// STATIC-LABEL: func.func @train_step(
// STATIC-SAME:    kiln.initial = dense<1.280000e+02> : tensor<f32>, kiln.name = "kiln.state.loss_scale"
// STATIC-NOT:     good_steps
// STATIC:         %[[SUM:.*]] = kiln.reduce <sum>
// STATIC-NOT:     kiln.reduce
// STATIC:         kiln.sqrt %[[SUM]]
// STATIC-NOT:     kiln.reduce
// STATIC:         return

// No loss scaling: the seed argument is bound to 1, nothing else changes.
// NONE-LABEL: func.func @train_step(
// NONE-NOT:     loss_seed
// NONE-NOT:     loss_scale
// NONE:         %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// NONE:         kiln.mul %{{.*}}, %[[ONE]]
// NONE-NOT:     kiln.select
// NONE-NOT:     skipped

ml_program.global private @W(dense<1.0> : tensor<2x3xf32>) : tensor<2x3xf32>
func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x3xf32> {kiln.name = "y"}) {
  %W = ml_program.global_load_const @W : tensor<2x3xf32>
  %0 = kiln.matmul %x, %W : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
func.func @train_grad(%x: tensor<4x2xf32> {kiln.name = "x"}, %t: tensor<4x3xf32> {kiln.name = "labels"}, %seed: tensor<f32> {kiln.loss_seed, kiln.name = "loss_seed"}) -> (tensor<f32>, tensor<2x3xf32>) attributes {kiln.gradients = [@W]} {
  %W = ml_program.global_load_const @W : tensor<2x3xf32>
  %0 = kiln.matmul %x, %W : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %d = kiln.sub %0, %t : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %l = kiln.reduce <mean> %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  %ds = kiln.mul %d, %seed : tensor<4x3xf32>, tensor<f32> -> tensor<4x3xf32>
  %xt = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
  %gW = kiln.matmul %xt, %ds : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %l, %gW : tensor<f32>, tensor<2x3xf32>
}
