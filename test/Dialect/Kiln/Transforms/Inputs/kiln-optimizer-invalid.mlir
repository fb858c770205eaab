// Malformed inputs of kiln-optimizer (kiln-optimizer.mlir runs this file
// with -verify-diagnostics; it lives in Inputs/ so its cases do not run
// through the other RUN lines).

// No gradient function at all.
// expected-error @below {{kiln-optimizer: the module has no @train_grad (run the autodiff pipeline first: kilnc --train)}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// A gradient list entry that is not a global.
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: kiln.gradients entry @nothing is not an ml_program.global}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) attributes {kiln.gradients = [@nothing]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}

// -----

// An integer global cannot train.
module {
  ml_program.global private @k(dense<1> : tensor<2xi32>) : tensor<2xi32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: trainable global @k is not a static f32 tensor}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xi32>) attributes {kiln.gradients = [@k]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %k = ml_program.global_load_const @k : tensor<2xi32>
    return %l, %k : tensor<f32>, tensor<2xi32>
  }
}

// -----

// A gradient whose type is not its global's.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: gradient 0 does not have @w's type}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<f32>) attributes {kiln.gradients = [@w]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %l : tensor<f32>, tensor<f32>
  }
}

// -----

// Results that are not a loss and one gradient per entry.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: @train_grad must return a tensor<f32> loss, one gradient per kiln.gradients entry (1) and one update per kiln.state_updates entry (0)}}
  func.func @train_grad(%x: tensor<2xf32>) -> tensor<2xf32> attributes {kiln.gradients = [@w]} {
    return %x : tensor<2xf32>
  }
}

// -----

// Nothing to train.
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: kiln.gradients is empty: there is nothing to train (is every weight frozen?)}}
  func.func @train_grad(%x: tensor<2xf32>) -> tensor<f32> attributes {kiln.gradients = []} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// No forward function to become eval.
// expected-error @below {{kiln-optimizer: the module has no forward @main}}
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) attributes {kiln.gradients = [@w]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}

// -----

// A batch norm's running statistic must be a global kiln-autodiff does not
// also train.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: global @w appears twice in kiln.gradients and kiln.state_updates}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>, tensor<2xf32>) attributes {kiln.gradients = [@w], kiln.state_updates = [@w]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x, %x : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  }
}

// -----

// One update per kiln.state_updates entry must follow the gradients.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  ml_program.global private @mean(dense<0.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: @train_grad must return a tensor<f32> loss, one gradient per kiln.gradients entry (1) and one update per kiln.state_updates entry (1)}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) attributes {kiln.gradients = [@w], kiln.state_updates = [@mean]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}

// -----

// An update must have its running statistic's type.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  ml_program.global private @mean(dense<0.0> : tensor<3xf32>) : tensor<3xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: state update 0 does not have @mean's type}}
  func.func @train_grad(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>, tensor<2xf32>) attributes {kiln.gradients = [@w], kiln.state_updates = [@mean]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x, %x : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  }
}

// -----

// The loss seed (kiln-autodiff loss-seed-argument) must be the last
// argument, a tensor<f32>.
module {
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
  // expected-error @below {{kiln-optimizer: the kiln.loss_seed argument must be @train_grad's last, a tensor<f32>}}
  func.func @train_grad(%s: tensor<f32> {kiln.loss_seed}, %x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) attributes {kiln.gradients = [@w]} {
    %l = kiln.reduce <sum> %x {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}
