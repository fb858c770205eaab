"""The float64 reference of train_fuzz.py's step: the graph's loss and
gradients in JAX (onnx_jax.py), their sensitivities under perturbation, and
each optimizer's first step with its per-element bound (train_fuzz.py's
docstring states the rule). Split from train_fuzz.py, which runs Kiln and
compares; the modes' constants live here because the bounds use them."""
import numpy as np
import onnx
import onnx.numpy_helper as onh

import fusion_fuzz as ff
import numerics
import onnx_jax

OPTIMIZERS = {
    "sgd": ("sgd:lr=0.1", {"lr": 0.1}),
    "momentum": ("momentum:lr=0.1,momentum=0.9", {"lr": 0.1, "mu": 0.9}),
    "nesterov": ("nesterov:lr=0.1,momentum=0.9,weight_decay=0.01",
                 {"lr": 0.1, "mu": 0.9, "wd": 0.01}),
    "adam": ("adam:lr=0.01,weight_decay=0.1,beta1=0.9,beta2=0.999,eps=1e-8",
             {"lr": 0.01, "wd": 0.1, "b1": 0.9, "b2": 0.999, "eps": 1e-8}),
    "adamw": ("adamw:lr=0.01,weight_decay=0.1,beta1=0.9,beta2=0.999,eps=1e-8",
              {"lr": 0.01, "wd": 0.1, "b1": 0.9, "b2": 0.999, "eps": 1e-8}),
}
ROTATION = ["sgd", "adamw", "sgd-bf16", "adamw-bf16", "momentum", "momentum-bf16",
            "nesterov", "adam", "nesterov-bf16", "adam-bf16",
            "sgd-fp16", "adamw-fp16", "momentum-fp16", "nesterov-fp16", "adam-fp16"]
PERTURB = {"fp32": 1e-3, "bf16": numerics.UNIT_ROUNDOFF["bf16"],
           "fp16": numerics.UNIT_ROUNDOFF["fp16"]}
FP16_SCALE = 65536.0          # --loss-scale=dynamic's initial scale
FP16_MAX = 65504.0            # the largest finite fp16
SKIP_BAND = 2.0               # the overflow prediction's uncertainty factor
CONTRACTIONS = ("MatMul", "Gemm", "Conv")
PERTURB_DRAWS = 4
ALLOWANCE = ff.ALLOWANCE      # s_i: this many first-order rounding responses
FLOOR_REL = ff.FLOOR_REL      # gradient error floor: this fraction of max |g|
ROUND = 8                     # fp32 roundings allowed in the update chain
BIAS_ULPS = 4                 # ulps of 1 in each fp32 bias correction
U32 = numerics.UNIT_ROUNDOFF["fp32"]
LABELS = "fuzz_labels"
LOSS_KEY = "train_fuzz.loss"



# --- Reference ----------------------------------------------------------------


class Reference:
    """L, g (per weight) in float64 and their sensitivities D_L, D_g."""


def reference(case, precision):
    """The JAX reference of the case, perturbed at the precision's scale
    (cached per perturbation size)."""
    pert = PERTURB[precision]
    if pert in case._refs:
        return case._refs[pert]
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    @jax.custom_vjp
    def noisy(v, f, b):
        return v * f

    def noisy_fwd(v, f, b):
        return v * f, (f, b)

    def noisy_bwd(res, ct):
        f, b = res
        return ct * f * b, jnp.zeros_like(f), jnp.zeros_like(b)
    noisy.defvjp(noisy_fwd, noisy_bwd)

    x64 = case.x.astype(np.float64)
    labels = (case.labels.astype(np.float64) if case.loss == "mse"
              else case.labels)
    shapes = ff.value_shapes(case.model)
    noisy_names = [o for n in case.model.graph.node for o in n.output
                   if o and shapes.get(o, (0,))[0] == onnx.TensorProto.FLOAT]

    def loss_fn(params, x, noise):
        # noise: name -> (forward factor, backward factor), every node result
        # and the loss; all ones for the unperturbed reference.
        stats = {}
        env = onnx_jax.run(case.model, params, {case.input: x},
                           lambda name, v: noisy(v, *noise[name]), stats=stats)
        y = env[case.output]
        # Batch norms: the batch's mean and variance per channel, and the
        # largest |x| they were computed from (the scale of their rounding).
        bn = {n.output[0]: stats[n.output[0]] +
              (jnp.max(jnp.abs(env[n.input[0]])),)
              for n in case.model.graph.node if n.op_type == "BatchNormalization"}
        loss = loss_of(case, y, labels)
        return noisy(loss, *noise["fuzz_loss"]), (y, bn)

    # One compile per case, PERTURB_DRAWS + 1 runs per precision.
    if not hasattr(case, "grad"):
        case.grad = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    grad = case.grad
    ones = {n: (np.ones(shapes[n][1]), np.ones(shapes[n][1])) for n in noisy_names}
    ones["fuzz_loss"] = (np.ones(()), np.ones(()))
    (L, (y, bn)), g = grad(case.w0, x64, ones)
    r = Reference()
    r.bn = {k: tuple(np.asarray(v) for v in t) for k, t in bn.items()}
    r.d_bn = {k: [np.zeros_like(t[0]), np.zeros_like(t[1])] for k, t in r.bn.items()}
    r.loss = float(L)
    r.y = np.asarray(y)
    r.g = {n: np.asarray(v) for n, v in g.items()}
    # The scale of the backward's rounding: the largest gradient element, or
    # the loss's own cotangent dL/dy times the output's scale when every
    # gradient cancels to zero (a bias the softmax of the loss ignores).
    if case.loss == "mse":
        dldy = 2 * (r.y - labels) / r.y.size
    else:
        p = np.exp(r.y - np.max(r.y, axis=1, keepdims=True))
        p /= np.sum(p, axis=1, keepdims=True)
        onehot = np.zeros_like(p)
        np.put_along_axis(onehot, np.expand_dims(labels, 1), 1.0, axis=1)
        dldy = (p - onehot) / (r.y.size / r.y.shape[1])
    r.g_scale = max([float(np.max(np.abs(v))) for v in r.g.values() if v.size] +
                    [float(np.max(np.abs(dldy))) * max(1.0, float(np.max(np.abs(r.y))))])
    r.d_loss = 0.0
    r.d_y = np.zeros_like(r.y)
    r.d_g = {n: np.zeros_like(v) for n, v in r.g.items()}
    rng = np.random.default_rng(11)
    for _ in range(PERTURB_DRAWS):
        noise = {n: (1 + pert * rng.standard_normal(f.shape),
                     1 + pert * rng.standard_normal(f.shape))
                 for n, (f, _) in ones.items()}
        pw = {n: v * (1 + pert * rng.standard_normal(v.shape))
              for n, v in case.w0.items()}
        px = x64 * (1 + pert * rng.standard_normal(x64.shape))
        (pL, (py, pbn)), pg = grad(pw, px, noise)
        for k, d in r.d_bn.items():
            for i in (0, 1):
                d[i] = np.fmax(d[i], np.abs(np.asarray(pbn[k][i]) - r.bn[k][i]))
        r.d_loss = max(r.d_loss, abs(float(pL) - r.loss))
        r.d_y = np.fmax(r.d_y, np.abs(np.asarray(py) - r.y))
        for n in r.d_g:
            r.d_g[n] = np.fmax(r.d_g[n], np.abs(np.asarray(pg[n]) - r.g[n]))
    case._refs[pert] = r
    return r


def inference_forward(case, precision):
    """The output with BatchNormalization in inference form (running
    statistics) in float64, and its largest change over PERTURB_DRAWS
    perturbed runs (inputs, weights and node results)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    pert = PERTURB[precision]

    @jax.jit
    def fwd(params, x, noise):
        env = onnx_jax.run(case.model, params, {case.input: x},
                           lambda name, v: v * noise[name] if noise else v,
                           bn_training=False)
        return env[case.output]
    shapes = ff.value_shapes(case.model)
    names = [o for n in case.model.graph.node for o in n.output
             if o and shapes.get(o, (0,))[0] == onnx.TensorProto.FLOAT]
    x64 = case.x.astype(np.float64)
    y = np.asarray(fwd(case.w0, x64, {n: np.ones(shapes[n][1]) for n in names}))
    d_y = np.zeros_like(y)
    rng = np.random.default_rng(13)
    for _ in range(PERTURB_DRAWS):
        noise = {n: 1 + pert * rng.standard_normal(shapes[n][1]) for n in names}
        pw = {n: v * (1 + pert * rng.standard_normal(v.shape))
              for n, v in case.w0.items()}
        px = x64 * (1 + pert * rng.standard_normal(x64.shape))
        d_y = np.fmax(d_y, np.abs(np.asarray(fwd(pw, px, noise)) - y))
    return y, d_y


def scaled_cotangents(case):
    """(M_sure, M_maybe): the largest |dL/dv| over the results v of the
    contractions (MatMul, Gemm, Conv) that depend on a trainable weight,
    whose cotangent, times the loss scale, is an fp16 operand of a backward
    contraction (docs/runtime.md: dL/dy in fp16); M_maybe also over
    AveragePool results (their backward is a transposed convolution of
    dY / count). Float64, unperturbed; cached."""
    if hasattr(case, "cotangents"):
        return case.cotangents
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    active = set(case.weights)
    for n in case.model.graph.node:
        if any(i in active for i in n.input):
            active.update(o for o in n.output if o)
    sure = [n.output[0] for n in case.model.graph.node
            if n.op_type in CONTRACTIONS and n.output[0] in active]
    maybe = sure + [n.output[0] for n in case.model.graph.node
                    if n.op_type == "AveragePool" and n.output[0] in active]
    if not maybe:
        case.cotangents = (0.0, 0.0)
        return case.cotangents
    shapes = ff.value_shapes(case.model)
    labels = (case.labels.astype(np.float64) if case.loss == "mse"
              else case.labels)

    def f(deltas):
        env = onnx_jax.run(case.model, case.w0, {case.input: case.x.astype(np.float64)},
                           lambda name, v: v + deltas[name] if name in deltas else v)
        return loss_of(case, env[case.output], labels)
    ct = jax.grad(f)({n: jnp.zeros(shapes[n][1]) for n in maybe})
    m = {n: float(np.max(np.abs(np.asarray(v)))) for n, v in ct.items()}
    case.cotangents = (max([m[n] for n in sure] + [0.0]), max(m.values()))
    return case.cotangents


def loss_of(case, y, labels):
    """The loss of output y (jax.numpy): mse, or cross-entropy over dim 1."""
    import jax
    import jax.numpy as jnp
    if case.loss == "mse":
        return jnp.mean((y - labels) ** 2)
    z = y - jax.lax.stop_gradient(jnp.max(y, axis=1, keepdims=True))
    logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
    picked = jnp.take_along_axis(logp, np.expand_dims(labels, 1), axis=1)
    return -jnp.mean(picked)


def check_reference(case, precision):
    """The JAX forward against onnxruntime fp32: '' or what disagrees
    (a harness or generator problem, not Kiln's)."""
    ref = reference(case, precision)
    y, d_y = ref.y, ref.d_y
    if any(n.op_type == "BatchNormalization" for n in case.model.graph.node):
        # onnxruntime normalises with the running statistics (inference);
        # the same forward in JAX, perturbed the same way.
        y, d_y = inference_forward(case, precision)
    model = ff.expand_layer_norms(case.model)
    try:
        ort = ff.ort_session(model).run([case.output], {case.input: case.x})[0]
    except Exception as e:  # noqa: BLE001
        return f"onnxruntime rejects the model: {str(e).splitlines()[0][:200]}"
    scale = float(np.max(np.abs(y))) if y.size else 0.0
    allowance = (ALLOWANCE * U32 / PERTURB[precision]) * d_y + 1e-4 * FLOOR_REL * scale
    result = numerics.compare(ort, y, "fp32", case.output, allowance)
    return "" if result.ok else f"jax forward vs onnxruntime: {result.figures()}"


def grad_bound(ref, name, precision):
    """e_i: the bound on each element of the gradient Kiln computes."""
    g = ref.g[name]
    B = numerics.NORM_BOUND[precision]
    s = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB[precision]
    rms = float(np.sqrt(np.mean(g ** 2))) if g.size else 0.0
    floor = FLOOR_REL * ref.g_scale
    return numerics.ELEMENT_TAIL * B * rms + B * np.abs(g) + s * ref.d_g[name] + B * floor


def expected_running_stats(case, ref, precision):
    """{running statistic: (want, allowance)} after the step: each batch
    norm's running mean and variance become momentum * running + (1 -
    momentum) * the batch's (biased variance). The batch statistic is
    bounded as an output is (fusion_fuzz.py), with the floor B 1e-2 m
    (mean) or B 1e-2 m^2 (variance), m the largest |x| it reads."""
    B = numerics.NORM_BOUND[precision]
    s = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB[precision]
    out = {}
    inits = {t.name: onh.to_array(t).astype(np.float64)
             for t in case.model.graph.initializer}
    for node in case.model.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        mom = onnx_jax._attrs(node).get("momentum", 0.9)
        mean, var, m = ref.bn[node.output[0]]
        for i, (stat, floor) in enumerate([(mean, m), (var, m * m)]):
            name = node.input[3 + i]
            if name not in inits:
                continue
            rms = float(np.sqrt(np.mean(stat ** 2)))
            e = (numerics.ELEMENT_TAIL * B * rms + B * np.abs(stat)
                 + s * ref.d_bn[node.output[0]][i] + B * FLOOR_REL * floor)
            want = mom * inits[name] + (1 - mom) * stat
            out[name] = (want, (1 - mom) * e + ROUND * U32 * (
                np.abs(want) + mom * np.abs(inits[name])))
    return out


def expected_step(case, ref, opt, precision, trained):
    """{what: (want, allowance)} for every trained weight (in graph order,
    the order of the flat moments) and moment after one step of `opt`
    (float64)."""
    _, hp = OPTIMIZERS[opt]
    lr = hp["lr"]
    out = {}
    flat_m, flat_mb, flat_v, flat_vb = [], [], [], []
    for n in trained:
        w0, g = case.w0[n], ref.g[n]
        e = grad_bound(ref, n, precision)
        if opt in ("sgd", "momentum", "nesterov"):
            # Coupled weight decay (L2): the step is g + wd w; the buffer
            # starts at 0, so buf = step and nesterov moves by step + mu buf.
            wd = hp.get("wd", 0.0)
            sg = g + wd * w0
            k = 1 + hp["mu"] if opt == "nesterov" else 1.0
            w1 = w0 - lr * k * sg
            bound = lr * k * e + ROUND * U32 * (
                np.abs(w1) + lr * k * (np.abs(sg) + wd * np.abs(w0)))
            if opt != "sgd":
                flat_m.append(sg.ravel())
                flat_mb.append((e + ROUND * U32 * (np.abs(sg) + wd * np.abs(w0)))
                               .ravel())
        else:
            b1, b2, eps, wd = hp["b1"], hp["b2"], hp["eps"], hp["wd"]

            def step(gg):
                return lr * gg / (np.abs(gg) + eps)
            mag = np.abs(g)
            if opt == "adam":
                # Adam's weight decay is L2 (added to the gradient, with
                # the rounding of that sum) and the moments see g + wd w;
                # adamw's decays the weight instead.
                mag = mag + wd * np.abs(w0)
                g = g + wd * w0
                e = e + ROUND * U32 * mag
                w1 = w0 - step(g)
            else:
                w1 = w0 * (1 - lr * wd) - step(g)
            moved = np.maximum(np.abs(step(g + e) - step(g)),
                               np.abs(step(g - e) - step(g)))
            # The bias corrections 1 - b^t are computed in fp32: a few ulps
            # of 1 relative to 1 - b (u / (1 - b2) = 6e-5 for b2 = 0.999;
            # the square root halves it), as in PyTorch's fp32 Adam.
            bc = BIAS_ULPS * U32 * (1 / (1 - b1) + 0.5 / (1 - b2))
            bound = moved + ROUND * U32 * np.abs(w1) + lr * (ROUND * U32 + bc)
            flat_m.append(((1 - b1) * g).ravel())
            flat_mb.append(((1 - b1) * (e + ROUND * U32 * mag)).ravel())
            v = (1 - b2) * g ** 2
            flat_v.append(v.ravel())
            flat_vb.append(((1 - b2) * ((np.abs(g) + e) ** 2 - g ** 2)
                            + ROUND * U32 * (1 - b2) * mag ** 2).ravel())
        out[n] = (w1, bound)
    out.update(expected_running_stats(case, ref, precision))
    if flat_m:
        out["kiln.state.opt.m"] = (np.concatenate(flat_m), np.concatenate(flat_mb))
    if flat_v:
        out["kiln.state.opt.v"] = (np.concatenate(flat_v), np.concatenate(flat_vb))
    return out


