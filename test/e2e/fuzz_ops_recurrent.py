"""Recurrent-layer generators of the random-graph builder.

RNN, GRU and LSTM on a rank-3 value read as [T, B, I] (layout 0: the
reference, onnxruntime, refuses layout 1, which recurrent_models.py tests
through a layout-0 twin): forward, reverse or bidirectional; activations drawn
from those whose parameters onnxruntime and the ONNX definitions read
alike (with alpha/beta where they take them); clip now and then;
GRU's linear_before_reset; LSTM's input_forget and peepholes; the bias,
initial states and sequence_lens (a constant, each length in [0, T]) as
initializers, each optional. The outputs are Y and Y_h (Y_c for LSTM),
all float. Inference compiles these through the persistent recurrence
kernel (kiln.recurrence), so the fuzzer checks it against onnxruntime in
every configuration: fused and unfused, each layout and precision (the
recurrence itself stays fp32), each contraction-kernel family.

They are not in Builder.OPS (the graphs the other fuzz tests pin would
change): `fusion_fuzz.py --focus recurrent` adds them
(fuzz_generator.py's focused) and test/e2e/fusion-fuzz-recurrent.test
runs them.
"""
import numpy as np
import onnx.numpy_helper as onh

# (activation, takes alpha, takes beta): each direction draws its own.
# onnxruntime's RNN kernels index activation_alpha/beta per direction where
# the spec consumes them in order, so a list gives each activation of a
# direction at most one alpha and one beta and both directions the same
# activations (RecurrentHandlers.cpp and recurrent_models.py say more).
ACTIVATIONS = [("Sigmoid", False, False), ("Tanh", False, False),
               ("Relu", False, False), ("HardSigmoid", True, True),
               ("LeakyRelu", True, False), ("Softsign", False, False),
               ("ScaledTanh", True, True), ("Affine", True, True)]
# The gates' activation (role 0 of GRU and LSTM) stays bounded: an
# unbounded gate (LeakyRelu, Affine) lets the state overflow within a few
# steps, where Kiln's and onnxruntime's algebraically equal updates (GRU's
# c + z (h - c) against (1 - z) c + z h) give NaN against -inf.
BOUNDED = [a for a in ACTIVATIONS if a[0] in ("Sigmoid", "Tanh", "HardSigmoid",
                                             "Softsign", "ScaledTanh")]
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ROLES = {"RNN": 1, "GRU": 2, "LSTM": 3}


class RecurrentOps:
    """Mixed into Builder (fuzz_generator.py), which provides GraphCore."""

    def op_recurrent(self):
        t = self.pick(lambda v: v.rank == 3 and v.shape[2] <= 16)
        if t is None:
            return False
        op = self.choice(["RNN", "GRU", "LSTM"], p=[1, 1, 2])
        layout = 0  # onnxruntime refuses layout 1 (recurrent_models.py tests it)
        steps, batch = (t.shape[1], t.shape[0]) if layout else t.shape[:2]
        inputs_size = t.shape[2]
        direction = self.choice(["forward", "reverse", "bidirectional"],
                                p=[2, 1, 2])
        d = 2 if direction == "bidirectional" else 1
        hidden = self.choice([1, 2, 3, 4, 5, 8, 12, 16], p=[1, 1, 2, 3, 1, 2, 1, 1])
        if steps > 64 or steps * d * batch * hidden > 1024:
            return False
        g = GATES[op]
        scale = 1.0 / np.sqrt(max(hidden, inputs_size))
        inputs = [t.name, self.weight((d, g * hidden, inputs_size), scale, "W"),
                  self.weight((d, g * hidden, hidden), scale * 0.8, "R")]
        optional = []
        optional.append(self.weight((d, 2 * g * hidden), 0.3, "B")
                        if self.chance(0.7) else "")
        if self.chance(0.4):
            name = self.fresh("lens")
            # onnxruntime's RNN gives undefined last states for a row of
            # length 0 (NaN, or the initial state); its LSTM and GRU zeros.
            low = 1 if op == "RNN" else 0
            lens = self.rng.integers(low, steps + 1, size=batch).astype(np.int32)
            self.inits.append(onh.from_array(lens, name))
            optional.append(name)
        else:
            optional.append("")
        state = (batch, d, hidden) if layout else (d, batch, hidden)
        optional.append(self.weight(state, 0.5, "h0") if self.chance(0.5) else "")
        if op == "LSTM":
            optional.append(self.weight(state, 0.5, "c0") if self.chance(0.5) else "")
            optional.append(self.weight((d, 3 * hidden), 0.5, "P")
                            if self.chance(0.3) else "")
        while optional and not optional[-1]:
            optional.pop()
        attrs = {"hidden_size": hidden, "direction": direction}
        if layout:
            attrs["layout"] = 1
        if self.chance(0.5):
            names, alphas, betas = [], [], []
            for role in range(ROLES[op]):
                gate = role == 0 and op != "RNN"
                name, alpha, beta = self.choice(BOUNDED if gate else ACTIVATIONS)
                names.append(name)
                if alpha:
                    alphas.append(round(float(self.rng.uniform(0.1, 1.5)), 3))
                if beta:
                    betas.append(round(float(self.rng.uniform(-0.5, 0.5)), 3))
            attrs["activations"] = names * d
            if alphas:
                attrs["activation_alpha"] = alphas * d
            if betas:
                attrs["activation_beta"] = betas * d
        if self.chance(0.25):
            attrs["clip"] = round(float(self.rng.uniform(0.5, 3.0)), 3)
        if op == "GRU" and self.chance(0.5):
            attrs["linear_before_reset"] = 1
        if op == "LSTM" and self.chance(0.2):
            attrs["input_forget"] = 1
        y = (batch, steps, d, hidden) if layout else (steps, d, batch, hidden)
        outputs = [y, state] + ([state] if op == "LSTM" else [])
        self.emit(op, inputs + optional, outputs, **attrs)
        return True
