// kiln-optimizer shard-optimizer=N (kilnc --shard-optimizer, ZeRO stage 1):
// the data-parallel split, with @train_update on one shard of S =
// ceil(6 / 4) = 2 elements and the gradients padded to 4 x 2 = 8. The
// input is the loss-scale test's @train_grad (a seeded backward); with
// loss scaling and clipping the squared norm moves to @train_grad_norm.
// RUN: kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum lr=0.5 loss-scale=dynamic grad-clip=1.0 data-parallel=true shard-optimizer=4})" | FileCheck %s
// Without clipping and loss scaling there is no norm to share; 2 shards of
// 3 need no padding.
// RUN: kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=adamw data-parallel=true shard-optimizer=2})" | FileCheck %s --check-prefix=PLAIN
// Errors: shard-optimizer without data-parallel, or negative.
// RUN: not kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum shard-optimizer=2})" 2>&1 | FileCheck %s --check-prefix=NODP
// NODP: error: kiln-optimizer: shard-optimizer needs data-parallel=true
// RUN: not kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum data-parallel=true shard-optimizer=-1})" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: kiln-optimizer: shard-optimizer must not be negative (shard-optimizer=-1)

// train_step writes the 6 gradients and 2 zeros as state `grad`.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<8xf32> {kiln.name = "kiln.state.grad.next", kiln.state = "grad"})
// CHECK:         %[[FLAT:.*]] = kiln.reshape %{{.*}} : tensor<2x3xf32> -> tensor<6xf32>
// CHECK:         %[[PAD:.*]] = kiln.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK:         %[[G:.*]] = kiln.concat %[[FLAT]], %[[PAD]] {axis = 0 : i64} : tensor<6xf32>, tensor<2xf32> -> tensor<8xf32>
// CHECK:         return %{{.*}}, %[[G]]

// train_grad_norm: the shard's sum of squares of the unscaled gradients.
// CHECK-LABEL: func.func @train_grad_norm(
// CHECK-SAME:    %[[S:[a-z0-9]+]]: tensor<f32> {{{.*}}kiln.state = "loss_scale"},
// CHECK-SAME:    %[[GS:[a-z0-9]+]]: tensor<2xf32> {kiln.name = "kiln.state.grad.shard", kiln.state = "grad.shard"})
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "kiln.state.grad.sqnorm.next", kiln.state = "grad.sqnorm"})
// CHECK:         %[[INV:.*]] = kiln.div %{{.*}}, %[[S]]
// CHECK:         %[[U:.*]] = kiln.mul %[[GS]], %[[INV]]
// CHECK:         %[[SQ:.*]] = kiln.mul %[[U]], %[[U]]
// CHECK:         %[[SUM:.*]] = kiln.reduce <sum> %[[SQ]] {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
// CHECK:         return %[[SUM]]

// train_update: shards of 2 (params.shard, opt.m, grad.shard) and the
// ranks' summed squared norm; no reduction of its own.
// CHECK-LABEL: func.func @train_update(
// CHECK-SAME:    %[[P:[a-z0-9]+]]: tensor<2xf32> {kiln.name = "kiln.state.params.shard", kiln.state = "params.shard"},
// CHECK-SAME:    %[[M:[a-z0-9]+]]: tensor<2xf32> {kiln.name = "kiln.state.opt.m", kiln.state = "opt.m"},
// CHECK-SAME:    %{{.*}}: tensor<2xf32> {kiln.name = "kiln.state.grad.shard", kiln.state = "grad.shard"},
// CHECK-SAME:    %[[NORM:[a-z0-9]+]]: tensor<f32> {kiln.name = "kiln.state.grad.sqnorm", kiln.state = "grad.sqnorm"})
// CHECK-SAME:    -> (tensor<2xf32> {kiln.name = "kiln.state.params.shard.next", kiln.state = "params.shard"},
// CHECK-SAME:        tensor<2xf32> {kiln.name = "kiln.state.opt.m.next", kiln.state = "opt.m"},
// CHECK-NOT:     kiln.reduce
// CHECK:         kiln.abs %[[NORM]]
// CHECK:         kiln.sqrt %[[NORM]]
// CHECK:         kiln.select %{{.*}}, %{{.*}}, %[[P]] : tensor<i1>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
// CHECK:         kiln.select %{{.*}}, %{{.*}}, %[[M]] : tensor<i1>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>

// PLAIN-LABEL: func.func @train_step(
// PLAIN-SAME:    tensor<6xf32> {kiln.name = "kiln.state.grad.next", kiln.state = "grad"})
// PLAIN-NOT:     kiln.concat
// PLAIN-NOT:     @train_grad_norm
// PLAIN-LABEL: func.func @train_update(
// PLAIN-SAME:    tensor<3xf32> {kiln.name = "kiln.state.params.shard", kiln.state = "params.shard"}
// PLAIN-SAME:    tensor<3xf32> {kiln.name = "kiln.state.opt.m", kiln.state = "opt.m"}
// PLAIN-SAME:    tensor<3xf32> {kiln.name = "kiln.state.opt.v", kiln.state = "opt.v"}
// PLAIN-SAME:    tensor<3xf32> {kiln.name = "kiln.state.grad.shard", kiln.state = "grad.shard"})
// PLAIN-NOT:     grad.sqnorm
// PLAIN-NOT:     kiln.reduce
// PLAIN:         return
