// kiln-optimizer data-parallel=true (kilnc --data-parallel): @train_step
// stops at the flat gradients, which it writes as state `grad`; a new
// @train_update reads state `grad` and does everything after it (here:
// loss-scale unscaling and the finite check, global-norm clipping, the
// momentum rule, the scale's update, the skipped flag), so the runtime can
// average `grad` across ranks in between. The input is the loss-scale
// test's @train_grad (a seeded backward).
// RUN: kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum lr=0.5 loss-scale=dynamic grad-clip=1.0 data-parallel=true})" | FileCheck %s
// Without the option nothing is split (the other kiln-optimizer tests).
// RUN: kiln-opt %S/kiln-optimizer-loss-scale.mlir --pass-pipeline="builtin.module(kiln-optimizer{optimizer=momentum loss-scale=dynamic})" | FileCheck %s --check-prefix=OFF
// OFF-NOT: @train_update
// OFF-NOT: kiln.state.grad

// train_step keeps the inputs, params and the loss scale (the seed); the
// optimizer's state is no longer its business. It returns the loss and
// the gradients as state `grad`, nothing of the update.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %{{.*}}: tensor<4x2xf32> {kiln.name = "x"}, %{{.*}}: tensor<4x3xf32> {kiln.name = "labels"},
// CHECK-SAME:    %[[P:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.params", kiln.state = "params"},
// CHECK-SAME:    %[[S:[a-z0-9]+]]: tensor<f32> {{{.*}}kiln.name = "kiln.state.loss_scale", kiln.state = "loss_scale"})
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<6xf32> {kiln.name = "kiln.state.grad.next", kiln.state = "grad"})
// CHECK:         %[[SEEDED:.*]] = kiln.mul %{{.*}}, %[[S]]
// CHECK:         %[[G:.*]] = kiln.matmul %{{.*}}, %[[SEEDED]]
// CHECK:         %[[FLAT:.*]] = kiln.reshape %[[G]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NOT:     kiln.reduce <sum>
// CHECK-NOT:     kiln.select
// CHECK:         return %{{.*}}, %[[FLAT]] : tensor<f32>, tensor<6xf32>

// train_update: every optimizer state, the scale, and `grad` last; no
// inputs. Unscale, the finite check and clipping read `grad`.
// CHECK-LABEL: func.func @train_update(
// CHECK-SAME:    %[[UP:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.params", kiln.state = "params"},
// CHECK-SAME:    %[[UM:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.opt.m", kiln.state = "opt.m"},
// CHECK-SAME:    %{{.*}}: tensor<f32> {kiln.name = "kiln.state.opt.step", kiln.state = "opt.step"},
// CHECK-SAME:    %[[US:[a-z0-9]+]]: tensor<f32> {{{.*}}kiln.name = "kiln.state.loss_scale", kiln.state = "loss_scale"},
// CHECK-SAME:    %{{.*}}: tensor<f32> {kiln.name = "kiln.state.loss_scale.good_steps", kiln.state = "loss_scale.good_steps"},
// CHECK-SAME:    %[[GRAD:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.grad", kiln.state = "grad"})
// CHECK-SAME:    -> (tensor<6xf32> {kiln.name = "kiln.state.params.next", kiln.state = "params"},
// CHECK-SAME:        tensor<6xf32> {kiln.name = "kiln.state.opt.m.next", kiln.state = "opt.m"},
// CHECK-SAME:        {kiln.name = "skipped"})
// CHECK-NOT:     kiln.matmul
// CHECK:         %[[INV:.*]] = kiln.div %{{.*}}, %[[US]]
// CHECK:         %[[U:.*]] = kiln.mul %[[GRAD]], %[[INV]]
// CHECK:         kiln.reduce <sum>
// CHECK:         kiln.sqrt
// CHECK:         kiln.min
// CHECK:         %[[NP:.*]] = kiln.select %{{.*}}, %{{.*}}, %[[UP]]
// CHECK:         %[[NM:.*]] = kiln.select %{{.*}}, %{{.*}}, %[[UM]]
// CHECK:         return %[[NP]], %[[NM]],
