// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd lr=0.5})" | FileCheck %s --check-prefix=SGD
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{optimizer=adamw lr=0.001 weight-decay=0.01 grad-clip=1.0})" | FileCheck %s --check-prefix=ADAMW
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{optimizer=nesterov momentum=0.8 schedule=cosine warmup-steps=2 total-steps=10})" | FileCheck %s --check-prefix=NESTEROV
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum schedule=step step-size=4 gamma=0.5})" | FileCheck %s --check-prefix=STEP

// Bad options: one line, non-zero exit.
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{optimizer=lion})" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: error: kiln-optimizer: unknown optimizer 'lion' (sgd, momentum, nesterov, adam, adamw)
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{lr=0})" 2>&1 | FileCheck %s --check-prefix=BADLR
// BADLR: error: kiln-optimizer: the learning rate must be positive (lr=0.000000e+00)
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{schedule=cosine warmup-steps=5 total-steps=5})" 2>&1 | FileCheck %s --check-prefix=BADCOS
// BADCOS: error: kiln-optimizer: the cosine schedule needs total-steps > warmup-steps (total-steps=5, warmup-steps=5)
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{schedule=step})" 2>&1 | FileCheck %s --check-prefix=BADSTEP
// BADSTEP: error: kiln-optimizer: the step schedule needs step-size > 0
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-optimizer{schedule=linear})" 2>&1 | FileCheck %s --check-prefix=BADSCHED
// BADSCHED: error: kiln-optimizer: unknown schedule 'linear' (constant, step, cosine)

// Malformed @train_grad modules: one diagnostic each.
// RUN: kiln-opt %S/Inputs/kiln-optimizer-invalid.mlir -split-input-file -verify-diagnostics --pass-pipeline="builtin.module(kiln-optimizer)"

// Two trainable weights (W 2x3, b 3) and a frozen one (s): the weights become
// slices of one flat params (9 elements) in both entry points, the gradients
// one concat, and the update one elementwise chain over all of them. The
// frozen global is still loaded as a constant.
ml_program.global private @W(dense<1.0> : tensor<2x3xf32>) : tensor<2x3xf32>
ml_program.global private @b(dense<0.5> : tensor<3xf32>) : tensor<3xf32>
ml_program.global private @s(dense<2.0> : tensor<3xf32>) : tensor<3xf32>
func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x3xf32> {kiln.name = "y"}) {
  %W = ml_program.global_load_const @W : tensor<2x3xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %s = ml_program.global_load_const @s : tensor<3xf32>
  %0 = kiln.matmul %x, %W : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %1 = kiln.add %0, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %2 = kiln.mul %1, %s : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  return %2 : tensor<4x3xf32>
}
func.func @train_grad(%x: tensor<4x2xf32> {kiln.name = "x"}, %t: tensor<4x3xf32> {kiln.name = "labels"}) -> (tensor<f32>, tensor<2x3xf32>, tensor<3xf32>) attributes {kiln.gradients = [@W, @b]} {
  %W = ml_program.global_load_const @W : tensor<2x3xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %s = ml_program.global_load_const @s : tensor<3xf32>
  %0 = kiln.matmul %x, %W : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %1 = kiln.add %0, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %2 = kiln.mul %1, %s : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %d = kiln.sub %2, %t : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %l = kiln.reduce <mean> %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  %xt = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
  %gW = kiln.matmul %xt, %d : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %gb = kiln.reduce <sum> %d {axes = array<i64: 0>, keepdims = false} : tensor<4x3xf32> -> tensor<3xf32>
  return %l, %gW, %gb : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
}

// SGD: module attributes {kiln.training = {layout = [{global = @W, offset = 0 : i64}, {global = @b, offset = 6 : i64}], optimizer = "sgd", size = 9 : i64}}
// SGD-LABEL: func.func @eval(
// SGD-SAME: %[[X:.*]]: tensor<4x2xf32> {kiln.name = "x"}, %[[P:.*]]: tensor<9xf32> {kiln.name = "kiln.state.params", kiln.state = "params"})
// SGD: %[[WF:.*]] = kiln.slice %[[P]] {limits = array<i64: 6>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<9xf32> -> tensor<6xf32>
// SGD: %[[W:.*]] = kiln.reshape %[[WF]] : tensor<6xf32> -> tensor<2x3xf32>
// SGD: %[[B:.*]] = kiln.slice %[[P]] {limits = array<i64: 9>, starts = array<i64: 6>, steps = array<i64: 1>} : tensor<9xf32> -> tensor<3xf32>
// SGD: ml_program.global_load_const @s
// SGD: kiln.matmul %[[X]], %[[W]]
// SGD-LABEL: func.func @train_step(
// SGD-SAME: %{{.*}}: tensor<4x2xf32> {kiln.name = "x"}, %{{.*}}: tensor<4x3xf32> {kiln.name = "labels"}, %[[P:.*]]: tensor<9xf32> {kiln.name = "kiln.state.params", kiln.state = "params"}, %[[T:.*]]: tensor<f32> {kiln.name = "kiln.state.opt.step", kiln.state = "opt.step"})
// SGD-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<9xf32> {kiln.name = "kiln.state.params.next", kiln.state = "params"}, tensor<f32> {kiln.name = "kiln.state.opt.step.next", kiln.state = "opt.step"})
// SGD: %[[GW:.*]] = kiln.reshape %{{.*}} : tensor<2x3xf32> -> tensor<6xf32>
// SGD: %[[G:.*]] = kiln.concat %[[GW]], %{{.*}} {axis = 0 : i64} : tensor<6xf32>, tensor<3xf32> -> tensor<9xf32>
// SGD: %[[T1:.*]] = kiln.add %[[T]], %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
// SGD: %[[LR:.*]] = kiln.constant dense<5.000000e-01> : tensor<f32>
// SGD: %[[UPD:.*]] = kiln.mul %[[LR]], %[[G]] : tensor<f32>, tensor<9xf32> -> tensor<9xf32>
// SGD: %[[NEW:.*]] = kiln.sub %[[P]], %[[UPD]] : tensor<9xf32>, tensor<9xf32> -> tensor<9xf32>
// SGD: return %{{.*}}, %[[NEW]], %[[T1]]
// SGD-NOT: @train_grad
// SGD-NOT: func.func @main

// AdamW: two moments, decoupled decay, bias corrections from the step, and
// the clip factor from one reduction over the concatenated gradients.
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: kiln.state = "opt.m"
// ADAMW-SAME: kiln.state = "opt.v"
// ADAMW: %[[G:.*]] = kiln.concat
// ADAMW: %[[SQ:.*]] = kiln.mul %[[G]], %[[G]] : tensor<9xf32>, tensor<9xf32> -> tensor<9xf32>
// ADAMW: kiln.reduce <sum> %[[SQ]] {axes = array<i64: 0>, keepdims = false} : tensor<9xf32> -> tensor<f32>
// ADAMW: kiln.sqrt
// ADAMW: kiln.min
// ADAMW: kiln.pow
// ADAMW: kiln.pow
// ADAMW: return %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<9xf32>, tensor<9xf32>, tensor<9xf32>, tensor<f32>

// Nesterov with cosine decay after a linear warm-up (a select on t <= 2).
// NESTEROV-LABEL: func.func @train_step(
// NESTEROV-SAME: kiln.state = "opt.m"
// NESTEROV-NOT: kiln.state = "opt.v"
// NESTEROV: kiln.cos
// NESTEROV: kiln.less_equal
// NESTEROV: kiln.select
// NESTEROV: return {{.*}} : tensor<f32>, tensor<9xf32>, tensor<9xf32>, tensor<f32>

// Step decay: lr * gamma ^ floor((t - 1) / step-size).
// STEP-LABEL: func.func @train_step(
// STEP: kiln.floor
// STEP: kiln.pow

// -----

// Batch-norm running statistics (kiln.state_updates, returned after the
// gradients) become the flat state bn.stats (@mean at 0, @var at 2): @eval
// and @train_step read slices of it in place of the globals, and
// @train_step's last result is the updates concatenated.
ml_program.global private @g(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @mean(dense<0.0> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @var(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
  %g = ml_program.global_load_const @g : tensor<2xf32>
  %m = ml_program.global_load_const @mean : tensor<2xf32>
  %v = ml_program.global_load_const @var : tensor<2xf32>
  %0 = kiln.sub %x, %m : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %1 = kiln.div %0, %v : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %2 = kiln.mul %1, %g : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  return %2 : tensor<4x2xf32>
}
func.func @train_grad(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) attributes {kiln.gradients = [@g], kiln.state_updates = [@mean, @var]} {
  %m = ml_program.global_load_const @mean : tensor<2xf32>
  %v = ml_program.global_load_const @var : tensor<2xf32>
  %bm = kiln.reduce <mean> %x {axes = array<i64: 0>, keepdims = false} : tensor<4x2xf32> -> tensor<2xf32>
  %k = kiln.constant dense<0.9> : tensor<f32>
  %km = kiln.mul %m, %k : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  %nm = kiln.add %km, %bm : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %nv = kiln.mul %v, %k : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  %l = kiln.reduce <sum> %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  return %l, %bm, %nm, %nv : tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// SGD: module attributes {kiln.training = {layout = [{global = @g, offset = 0 : i64}], optimizer = "sgd", size = 2 : i64, stats_layout = [{global = @mean, offset = 0 : i64}, {global = @var, offset = 2 : i64}], stats_size = 4 : i64}}
// SGD-LABEL: func.func @eval(
// SGD-SAME: %{{.*}}: tensor<2xf32> {kiln.name = "kiln.state.params", kiln.state = "params"}, %[[S:[^ :]+]]: tensor<4xf32> {kiln.name = "kiln.state.bn.stats", kiln.state = "bn.stats"})
// SGD: %[[M:.*]] = kiln.slice %[[S]] {limits = array<i64: 2>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<2xf32>
// SGD: %[[V:.*]] = kiln.slice %[[S]] {limits = array<i64: 4>, starts = array<i64: 2>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<2xf32>
// SGD: kiln.sub %{{.*}}, %[[M]]
// SGD: kiln.div %{{.*}}, %[[V]]
// SGD-LABEL: func.func @train_step(
// SGD-SAME: %[[T:[^ :]+]]: tensor<f32> {kiln.name = "kiln.state.opt.step", kiln.state = "opt.step"}, %[[S:[^ :]+]]: tensor<4xf32> {kiln.name = "kiln.state.bn.stats", kiln.state = "bn.stats"})
// SGD-SAME: tensor<f32> {kiln.name = "kiln.state.opt.step.next", kiln.state = "opt.step"}, tensor<4xf32> {kiln.name = "kiln.state.bn.stats.next", kiln.state = "bn.stats"})
// SGD: %[[M:.*]] = kiln.slice %[[S]] {limits = array<i64: 2>, starts = array<i64: 0>
// SGD: %[[KM:.*]] = kiln.mul %[[M]], %{{.*}}
// SGD: %[[NM:.*]] = kiln.add %[[KM]], %{{.*}}
// SGD: %[[T1:.*]] = kiln.add %[[T]], %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
// SGD: %[[NS:.*]] = kiln.concat %[[NM]], %{{.*}} {axis = 0 : i64} : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// SGD: return %{{.*}}, %{{.*}}, %[[T1]], %[[NS]] : tensor<f32>, tensor<2xf32>, tensor<f32>, tensor<4xf32>
