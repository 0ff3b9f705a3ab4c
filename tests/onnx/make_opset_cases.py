#!/usr/bin/env python3
"""Writes tests/onnx/opset_cases: small ONNX test cases for the API differences between opset versions.

The ONNX backend node tests (libonnx-testdata) mostly use each op's newest opset, so the converters' old-opset paths
(src/formats/onnx/convert_*.cc) are not exercised by them. Every case here is one op at one opset, in the ONNX
test-data layout (model.onnx, test_data_set_0/input_<i>.pb, output_<i>.pb), run by
`onnx_conformance --data tests/onnx/opset_cases` (ctest OnnxOpsetCases.Cpu).

Expected outputs come from the numpy formulas below, written from the ONNX operator spec, never from a runtime.
onnxruntime cross-checks every case whose opset it loads (it refuses some old opsets and BatchNormalization in
training mode); a disagreement stops the script. The onnx reference evaluator is not used: it is wrong for
old-opset Softmax, BatchNormalization-9 and LRN.

The values that the converters turn from attributes into inputs arrive in three ways over the cases: as an attribute
(old opsets), as a constant initializer or Constant node (known at import), and as a graph input (the importer asks
for it and runtime::Model imports again at bind time with its value).

Run by hand from the repository root (onnx, numpy, onnxruntime):
  ~/.cache/hxrt/onnxvenv/bin/python tests/onnx/make_opset_cases.py
"""
import math
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opset_cases")
RNG = np.random.default_rng(0)
CASES = []  # (name, ort status) for the summary

ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(np.bool_): TensorProto.BOOL}


def reseed(family):
    """Each family draws from its own seed, so adding a case changes only its family's data."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(family.encode()))


def f32(*shape):
    """Random float32 values in [-2, 2), distinct with probability 1 (no ties for Hardmax/TopK)."""
    return RNG.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def i64(values):
    return np.array(values, dtype=np.int64)


class Case:
    """One op at one opset: graph inputs (fed from input_<i>.pb), initializers, extra nodes, expected outputs."""

    def __init__(self, name, opset, op, attrs=None):
        self.name, self.opset, self.op, self.attrs = name, opset, op, attrs or {}
        self.node_inputs, self.inputs, self.initializers, self.nodes = [], [], [], []
        self.dims = {}

    def input(self, name, value, dims=None):
        """A graph input; `dims` overrides its declared shape (a str is a dim_param)."""
        self.node_inputs.append(name)
        self.inputs.append((name, value))
        if dims is not None:
            self.dims[name] = dims
        return self

    def init(self, name, value):
        """A constant initializer (not a graph input)."""
        self.node_inputs.append(name)
        self.initializers.append(numpy_helper.from_array(value, name))
        return self

    def const_node(self, name, value):
        """A Constant node's output."""
        self.node_inputs.append(name)
        self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name + "_t")))
        return self

    def omit(self):
        """An omitted optional input ("")."""
        self.node_inputs.append("")
        return self

    def write(self, outputs):
        """`outputs`: [(name, expected array)], the node's outputs in order."""
        node = helper.make_node(self.op, self.node_inputs, [n for n, _ in outputs], name=self.op.lower(),
                                **self.attrs)
        graph = helper.make_graph(
            self.nodes + [node], self.name,
            [helper.make_tensor_value_info(n, ELEM[v.dtype], self.dims.get(n, v.shape)) for n, v in self.inputs],
            [helper.make_tensor_value_info(n, ELEM[v.dtype], v.shape) for n, v in outputs],
            initializer=self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="hxrt make_opset_cases.py")
        model.ir_version = 3 if self.opset < 7 else helper.find_min_ir_version_for(opsets)
        if model.ir_version < 4:  # IR 3: every initializer is also a graph input
            model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                                     for t in self.initializers)
        onnx.checker.check_model(model)
        directory = os.path.join(OUT, self.name)
        data = os.path.join(directory, "test_data_set_0")
        os.makedirs(data)
        onnx.save(model, os.path.join(directory, "model.onnx"))
        for i, (n, v) in enumerate(self.inputs):
            onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(data, f"input_{i}.pb"))
        for i, (n, v) in enumerate(outputs):
            onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(data, f"output_{i}.pb"))
        CASES.append((self.name, cross_check(model, self.inputs, outputs)))


def cross_check(model, inputs, expected):
    """onnxruntime's outputs against the expected ones; 'n/a: why' when it cannot run the model."""
    try:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 (onnxruntime raises its own exception types)
        return "n/a: " + str(e).splitlines()[0][:90]
    got = session.run([n for n, _ in expected], {n: v for n, v in inputs})
    for (n, want), have in zip(expected, got):
        if want.dtype == np.float32:
            ok = have.shape == want.shape and np.allclose(have, want, rtol=1e-3, atol=1e-6)
        else:
            ok = have.shape == want.shape and np.array_equal(have, want)
        if not ok:
            sys.exit(f"{model.graph.name}: onnxruntime disagrees on '{n}':\n{have}\nexpected\n{want}")
    return "agrees"


# ---- numpy references, from the ONNX operator spec ----

def softmax_last(x2):
    e = np.exp(x2 - x2.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def normalise(op, x, axis):
    """op (Softmax, LogSoftmax, Hardmax) of `x` along `axis` (the opset-13 semantics)."""
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    if op == "Softmax":
        y = softmax_last(x)
    elif op == "LogSoftmax":
        y = np.log(softmax_last(x))
    else:  # the first maximum along the axis is 1, everything else 0
        y = np.zeros_like(x)
        np.put_along_axis(y, np.argmax(x, axis=-1)[..., None], 1.0, axis=-1)
    return np.moveaxis(y, -1, axis).astype(np.float32)


def normalise_coerced(op, x, axis):
    """Before opset 13: x viewed as [prod(dims[:axis]), prod(dims[axis:])], op over each row."""
    axis = axis % x.ndim
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return normalise(op, x.reshape(rows, -1), 1).reshape(x.shape)


def reduce(op, x, axes, keepdims=1, noop_with_empty_axes=0):
    x = x.astype(np.float64)
    if axes is None or len(axes) == 0:
        if noop_with_empty_axes:
            return x.astype(np.float32)
        axes = range(x.ndim)
    axes = tuple(a % x.ndim for a in axes)
    fns = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
           "ReduceProd": np.prod,
           "ReduceL2": lambda v, axis, keepdims: np.sqrt(np.sum(v * v, axis=axis, keepdims=keepdims)),
           "ReduceLogSumExp": lambda v, axis, keepdims: np.log(np.sum(np.exp(v), axis=axis, keepdims=keepdims))}
    return fns[op](x, axis=axes, keepdims=bool(keepdims)).astype(np.float32)


def slice_ref(x, starts, ends, axes=None, steps=None):
    """ONNX Slice: negative starts/ends count from the back, then clamp to [0, dim] (step > 0) or [-1, dim - 1]."""
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for start, end, axis, step in zip(starts, ends, axes, steps):
        dim = x.shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        x = np.take(x, list(range(start, end, step)), axis=axis)
    return x


def topk(x, k, axis=-1, largest=1):
    """The k largest (smallest) along axis, sorted; equal values by lower index."""
    keys = -x if largest else x
    order = np.argsort(keys, axis=axis, kind="stable")
    idx = np.take(order, range(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def pad_ref(x, pads, mode="constant", value=0.0):
    r = x.ndim
    width = [(pads[d], pads[d + r]) for d in range(r)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])


def resize_axis_matrix(in_len, out_len, scale, mode, transform, nearest_mode, roi=(0.0, 1.0)):
    """The [out_len, in_len] matrix resampling one axis, and the output positions outside the input (for
    tf_crop_and_resize). Coordinates from the spec of coordinate_transformation_mode; linear clamps to the edge."""
    w = np.zeros((out_len, in_len))
    outside = np.zeros(out_len, dtype=bool)
    for i in range(out_len):
        if transform == "half_pixel":
            x = (i + 0.5) / scale - 0.5
        elif transform == "pytorch_half_pixel":
            x = (i + 0.5) / scale - 0.5 if out_len > 1 else 0.0
        elif transform == "align_corners":
            x = 0.0 if out_len == 1 else i * (in_len - 1) / (out_len - 1)
        elif transform == "asymmetric":
            x = i / scale
        elif transform == "tf_crop_and_resize":
            start, end = roi
            x = (start * (in_len - 1) + i * (end - start) * (in_len - 1) / (out_len - 1) if out_len > 1
                 else 0.5 * (start + end) * (in_len - 1))
            if x < 0 or x > in_len - 1:
                outside[i] = True
                continue
        else:
            raise ValueError(transform)
        if mode == "nearest":
            frac = x - math.floor(x)
            j = {"floor": math.floor(x), "ceil": math.ceil(x),
                 "round_prefer_floor": math.floor(x) if frac == 0.5 else round(x),
                 "round_prefer_ceil": math.ceil(x) if frac == 0.5 else math.floor(x + 0.5),
                 # Resize-10 / Upsample: ONNX Runtime's "simple" mode, as ONNX's resize-10 test data.
                 "simple": math.ceil(x) if scale < 1 else math.floor(x)}[nearest_mode]
            w[i, min(max(j, 0), in_len - 1)] = 1.0
        else:
            x = min(max(x, 0.0), in_len - 1.0)
            j = min(int(math.floor(x)), in_len - 1)
            frac = x - j
            w[i, j] += 1.0 - frac
            w[i, min(j + 1, in_len - 1)] += frac
    return w, outside


def resize_ref(x, mode, transform, nearest_mode="round_prefer_floor", scales=None, sizes=None, roi=None,
               extrapolation_value=0.0):
    y = x.astype(np.float64)
    mask = np.zeros(x.shape, dtype=bool)
    for axis in range(x.ndim):
        in_len = x.shape[axis]
        if sizes is not None:
            out_len = int(sizes[axis])
            scale = out_len / in_len
        else:
            scale = float(scales[axis])
            out_len = int(math.floor(in_len * scale))
        box = (roi[axis], roi[axis + x.ndim]) if roi is not None else (0.0, 1.0)
        w, outside = resize_axis_matrix(in_len, out_len, scale, mode, transform, nearest_mode, box)
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, axis, 0), axes=1), 0, axis)
        mask = np.moveaxis(np.moveaxis(mask, axis, 0)[np.clip(np.arange(out_len), 0, in_len - 1)], 0, axis)
        mask |= np.moveaxis(np.broadcast_to(outside.reshape((-1,) + (1,) * (x.ndim - 1)),
                                            np.moveaxis(y, axis, 0).shape), 0, axis)
    y[mask] = extrapolation_value
    return y.astype(np.float32)


def batch_norm(x, scale, bias, mean, var, epsilon=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = ((x.astype(np.float64) - mean.reshape(shape)) / np.sqrt(var.astype(np.float64).reshape(shape) + epsilon)
         * scale.reshape(shape) + bias.reshape(shape))
    return y.astype(np.float32)


# ---- the cases ----

def softmax_family():
    reseed("softmax_family")
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        p = op.lower()
        x = f32(2, 3, 4)
        Case(f"{p}_11_default_axis", 11, op).input("x", x).write([("y", normalise_coerced(op, x, 1))])
        Case(f"{p}_1_axis0", 1, op, {"axis": 0}).input("x", x).write([("y", normalise_coerced(op, x, 0))])
        Case(f"{p}_11_axis_last", 11, op, {"axis": -1}).input("x", x).write([("y", normalise(op, x, -1))])
        Case(f"{p}_13_default_axis", 13, op).input("x", x).write([("y", normalise(op, x, -1))])
        Case(f"{p}_13_axis1", 13, op, {"axis": 1}).input("x", x).write([("y", normalise(op, x, 1))])
    x = f32(2, 3, 4)
    Case("logsoftmax_12_negative_axis", 12, "LogSoftmax", {"axis": -2}).input("x", x).write(
        [("y", normalise_coerced("LogSoftmax", x, -2))])
    # Ties: the first maximum of the coerced row (old) or of each row along the axis (13).
    xt = np.ones((2, 2, 2), np.float32)
    Case("hardmax_11_ties", 11, "Hardmax").input("x", xt).write([("y", normalise_coerced("Hardmax", xt, 1))])
    Case("hardmax_13_ties", 13, "Hardmax").input("x", xt).write([("y", normalise("Hardmax", xt, -1))])
    # The coerced view with a symbolic batch dim (it becomes the Reshape's -1).
    x = f32(3, 2, 2)
    Case("softmax_12_axis1_symbolic_batch", 12, "Softmax", {"axis": 1}).input(
        "x", x, dims=["batch", 2, 2]).write([("y", normalise_coerced("Softmax", x, 1))])


def reduce_family():
    reseed("reduce_family")
    x = f32(2, 3, 4)
    # ReduceSum: axes an attribute before 13, an input from 13.
    Case("reduce_sum_11_axes_attr", 11, "ReduceSum", {"axes": [1]}).input("x", x).write(
        [("y", reduce("ReduceSum", x, [1]))])
    Case("reduce_sum_11_no_axes_keepdims0", 11, "ReduceSum", {"keepdims": 0}).input("x", x).write(
        [("y", reduce("ReduceSum", x, None, keepdims=0))])
    Case("reduce_sum_13_axes_initializer", 13, "ReduceSum", {"keepdims": 0}).input("x", x).init(
        "axes", i64([0, -1])).write([("y", reduce("ReduceSum", x, [0, -1], keepdims=0))])
    Case("reduce_sum_13_axes_constant_node", 13, "ReduceSum").input("x", x).const_node("axes", i64([2])).write(
        [("y", reduce("ReduceSum", x, [2]))])
    Case("reduce_sum_13_axes_graph_input", 13, "ReduceSum").input("x", x).input("axes", i64([1, 2])).write(
        [("y", reduce("ReduceSum", x, [1, 2]))])
    Case("reduce_sum_13_noop_with_empty_axes", 13, "ReduceSum", {"noop_with_empty_axes": 1}).input("x", x).write(
        [("y", reduce("ReduceSum", x, None, noop_with_empty_axes=1))])
    Case("reduce_sum_13_empty_axes_reduces_all", 13, "ReduceSum").input("x", x).init(
        "axes", np.zeros(0, np.int64)).write([("y", reduce("ReduceSum", x, []))])
    # The others: an attribute before 18, an input from 18.
    Case("reduce_mean_13_axes_attr", 13, "ReduceMean", {"axes": [-1], "keepdims": 0}).input("x", x).write(
        [("y", reduce("ReduceMean", x, [-1], keepdims=0))])
    Case("reduce_mean_18_axes_initializer", 18, "ReduceMean").input("x", x).init("axes", i64([0, 2])).write(
        [("y", reduce("ReduceMean", x, [0, 2]))])
    Case("reduce_max_17_axes_attr", 17, "ReduceMax", {"axes": [0, 1]}).input("x", x).write(
        [("y", reduce("ReduceMax", x, [0, 1]))])
    Case("reduce_max_18_axes_graph_input", 18, "ReduceMax", {"keepdims": 0}).input("x", x).input(
        "axes", i64([1])).write([("y", reduce("ReduceMax", x, [1], keepdims=0))])
    Case("reduce_l2_11_axes_attr", 11, "ReduceL2", {"axes": [2]}).input("x", x).write(
        [("y", reduce("ReduceL2", x, [2]))])
    Case("reduce_log_sum_exp_18_noop_with_empty_axes", 18, "ReduceLogSumExp", {"noop_with_empty_axes": 1}).input(
        "x", x).write([("y", reduce("ReduceLogSumExp", x, None, noop_with_empty_axes=1))])
    Case("reduce_prod_18_no_axes", 18, "ReduceProd", {"keepdims": 0}).input("x", x).write(
        [("y", reduce("ReduceProd", x, None, keepdims=0))])


def squeeze_unsqueeze_split():
    reseed("squeeze_unsqueeze_split")
    x = f32(1, 3, 1, 2)
    Case("squeeze_11_axes_attr", 11, "Squeeze", {"axes": [0, -2]}).input("x", x).write([("y", x.reshape(3, 2))])
    Case("squeeze_11_no_axes", 11, "Squeeze").input("x", x).write([("y", x.reshape(3, 2))])
    Case("squeeze_13_axes_initializer", 13, "Squeeze").input("x", x).init("axes", i64([2])).write(
        [("y", x.reshape(1, 3, 2))])
    Case("squeeze_13_axes_graph_input", 13, "Squeeze").input("x", x).input("axes", i64([0])).write(
        [("y", x.reshape(3, 1, 2))])
    Case("squeeze_13_no_axes", 13, "Squeeze").input("x", x).write([("y", x.reshape(3, 2))])
    x = f32(3, 2)
    Case("unsqueeze_11_axes_attr", 11, "Unsqueeze", {"axes": [0, 3]}).input("x", x).write(
        [("y", x.reshape(1, 3, 2, 1))])
    Case("unsqueeze_1_axes_attr", 1, "Unsqueeze", {"axes": [1]}).input("x", x).write([("y", x.reshape(3, 1, 2))])
    Case("unsqueeze_13_axes_initializer", 13, "Unsqueeze").input("x", x).init("axes", i64([-1, 1])).write(
        [("y", x.reshape(3, 1, 2, 1))])
    Case("unsqueeze_13_axes_graph_input", 13, "Unsqueeze").input("x", x).input("axes", i64([0])).write(
        [("y", x.reshape(1, 3, 2))])

    x = f32(2, 6)
    Case("split_2_split_attr", 2, "Split", {"axis": 1, "split": [1, 5]}).input("x", x).write(
        [("a", x[:, :1]), ("b", x[:, 1:])])
    Case("split_11_equal_negative_axis", 11, "Split", {"axis": -1}).input("x", x).write(
        [("a", x[:, :2]), ("b", x[:, 2:4]), ("c", x[:, 4:])])
    Case("split_11_split_attr_axis0", 11, "Split", {"split": [1, 1]}).input("x", x).write(
        [("a", x[:1]), ("b", x[1:])])
    Case("split_13_split_initializer", 13, "Split", {"axis": 1}).input("x", x).init("split", i64([4, 2])).write(
        [("a", x[:, :4]), ("b", x[:, 4:])])
    Case("split_13_split_graph_input", 13, "Split", {"axis": 1}).input("x", x).input("split", i64([3, 1, 2])).write(
        [("a", x[:, :3]), ("b", x[:, 3:4]), ("c", x[:, 4:])])
    Case("split_13_equal", 13, "Split", {"axis": 1}).input("x", x).write([("a", x[:, :3]), ("b", x[:, 3:])])
    x = f32(7, 2)
    Case("split_18_num_outputs_uneven", 18, "Split", {"num_outputs": 3}).input("x", x).write(
        [("a", x[:3]), ("b", x[3:6]), ("c", x[6:])])


def clip():
    reseed("clip")
    x = f32(3, 4)
    Case("clip_6_min_max_attrs", 6, "Clip", {"min": -0.5, "max": 0.75}).input("x", x).write(
        [("y", np.clip(x, -0.5, 0.75))])
    Case("clip_6_min_attr_only", 6, "Clip", {"min": 0.25}).input("x", x).write([("y", np.maximum(x, 0.25))])
    Case("clip_6_no_attrs", 6, "Clip").input("x", x).write([("y", x.copy())])
    Case("clip_11_min_max_initializers", 11, "Clip").input("x", x).init("min", np.float32(-1.0)).init(
        "max", np.float32(0.5)).write([("y", np.clip(x, -1.0, 0.5))])
    Case("clip_11_max_only", 11, "Clip").input("x", x).omit().init("max", np.float32(0.0)).write(
        [("y", np.minimum(x, 0.0))])
    Case("clip_11_no_bounds", 11, "Clip").input("x", x).write([("y", x.copy())])
    Case("clip_13_min_max_graph_inputs", 13, "Clip").input("x", x).input("min", np.array(-0.25, np.float32)).input(
        "max", np.array(1.25, np.float32)).write([("y", np.clip(x, -0.25, 1.25))])
    xi = i64([[-5, -1, 0], [2, 7, 9]])
    Case("clip_12_int64_min_initializer", 12, "Clip").input("x", xi).init("min", np.int64(0)).write(
        [("y", np.maximum(xi, 0))])


def pad():
    reseed("pad")
    x = f32(2, 3)
    Case("pad_2_constant_value_attr", 2, "Pad", {"pads": [0, 1, 1, 2], "value": 1.5}).input("x", x).write(
        [("y", pad_ref(x, [0, 1, 1, 2], value=1.5))])
    Case("pad_2_reflect", 2, "Pad", {"pads": [1, 2, 0, 1], "mode": "reflect"}).input("x", x).write(
        [("y", pad_ref(x, [1, 2, 0, 1], "reflect"))])
    Case("pad_11_pads_initializer_constant_value", 11, "Pad").input("x", x).init("pads", i64([1, 0, 0, 2])).init(
        "value", np.float32(-3.0)).write([("y", pad_ref(x, [1, 0, 0, 2], value=-3.0))])
    Case("pad_11_pads_graph_input_edge", 11, "Pad", {"mode": "edge"}).input("x", x).input(
        "pads", i64([0, 2, 1, 1])).write([("y", pad_ref(x, [0, 2, 1, 1], "edge"))])
    Case("pad_13_default_zero", 13, "Pad").input("x", x).init("pads", i64([1, 1, 1, 1])).write(
        [("y", pad_ref(x, [1, 1, 1, 1]))])
    Case("pad_13_constant_value_graph_input", 13, "Pad").input("x", x).init("pads", i64([0, 1, 0, 1])).input(
        "value", np.array(2.5, np.float32)).write([("y", pad_ref(x, [0, 1, 0, 1], value=2.5))])
    x3 = f32(2, 3, 2)
    Case("pad_18_axes_initializer", 18, "Pad").input("x", x3).init("pads", i64([1, 2])).omit().init(
        "axes", i64([1])).write([("y", pad_ref(x3, [0, 1, 0, 0, 2, 0]))])
    Case("pad_18_negative_axes_graph_input_reflect", 18, "Pad", {"mode": "reflect"}).input("x", x3).init(
        "pads", i64([1, 0, 1, 1])).omit().input("axes", i64([-1, 0])).write(
        [("y", pad_ref(x3, [0, 0, 1, 1, 0, 1], "reflect"))])
    Case("pad_18_axes_constant_value", 18, "Pad").input("x", x3).init("pads", i64([2, 1])).init(
        "value", np.float32(0.5)).init("axes", i64([0])).write([("y", pad_ref(x3, [2, 0, 0, 1, 0, 0], value=0.5))])


def slice_cases():
    reseed("slice_cases")
    x = f32(4, 5)
    big = 2**63 - 1
    Case("slice_1_attrs", 1, "Slice", {"starts": [1, -4], "ends": [big, 4], "axes": [0, 1]}).input("x", x).write(
        [("y", slice_ref(x, [1, -4], [big, 4], [0, 1]))])
    Case("slice_9_attrs_no_axes", 9, "Slice", {"starts": [0, 2], "ends": [2, 100]}).input("x", x).write(
        [("y", slice_ref(x, [0, 2], [2, 100]))])
    Case("slice_10_initializers_steps", 10, "Slice").input("x", x).init("starts", i64([0])).init(
        "ends", i64([5])).init("axes", i64([1])).init("steps", i64([2])).write(
        [("y", slice_ref(x, [0], [5], [1], [2]))])
    Case("slice_10_negative_step", 10, "Slice").input("x", x).init("starts", i64([-1, 3])).init(
        "ends", i64([-big, 0])).init("axes", i64([0, 1])).init("steps", i64([-2, -1])).write(
        [("y", slice_ref(x, [-1, 3], [-big, 0], [0, 1], [-2, -1]))])
    Case("slice_10_no_axes_no_steps", 10, "Slice").input("x", x).init("starts", i64([1, 1])).init(
        "ends", i64([3, -1])).write([("y", slice_ref(x, [1, 1], [3, -1]))])
    Case("slice_13_graph_inputs_negative_axis", 13, "Slice").input("x", x).input("starts", i64([1])).input(
        "ends", i64([4])).input("axes", i64([-1])).write([("y", slice_ref(x, [1], [4], [-1]))])


def resize_cases():
    reseed("resize_cases")
    x = f32(1, 1, 2, 3)
    # Upsample-7: scales an attribute; Upsample-9 and Resize-10: scales an input; asymmetric coordinates.
    s = [1.0, 1.0, 2.0, 2.0]
    Case("upsample_7_nearest_scales_attr", 7, "Upsample", {"scales": [1.0, 1.0, 2.0, 3.0]}).input("x", x).write(
        [("y", resize_ref(x, "nearest", "asymmetric", "simple", scales=[1, 1, 2, 3]))])
    Case("upsample_7_linear_scales_attr", 7, "Upsample", {"scales": s, "mode": "linear"}).input("x", x).write(
        [("y", resize_ref(x, "linear", "asymmetric", scales=s))])
    Case("upsample_9_nearest_scales_initializer", 9, "Upsample").input("x", x).init(
        "scales", np.array([1, 1, 1.5, 2], np.float32)).write(
        [("y", resize_ref(x, "nearest", "asymmetric", "simple", scales=[1, 1, 1.5, 2]))])
    Case("upsample_9_linear_scales_graph_input", 9, "Upsample", {"mode": "linear"}).input("x", x).input(
        "scales", np.array(s, np.float32)).write([("y", resize_ref(x, "linear", "asymmetric", scales=s))])
    xd = f32(1, 1, 4, 6)
    down = [1.0, 1.0, 0.5, 0.6]
    Case("resize_10_nearest_downsample", 10, "Resize").input("x", xd).init("scales", np.array(down, np.float32)).write(
        [("y", resize_ref(xd, "nearest", "asymmetric", "simple", scales=down))])
    Case("resize_10_linear_upsample", 10, "Resize", {"mode": "linear"}).input("x", x).init(
        "scales", np.array([1, 1, 2, 1.5], np.float32)).write(
        [("y", resize_ref(x, "linear", "asymmetric", scales=[1, 1, 2, 1.5]))])
    # Resize-11: roi and scales required inputs (empty when unused), sizes optional.
    empty = np.zeros(0, np.float32)
    Case("resize_11_scales_linear_half_pixel", 11, "Resize", {"mode": "linear"}).input("x", x).init(
        "roi", empty).init("scales", np.array(s, np.float32)).write(
        [("y", resize_ref(x, "linear", "half_pixel", scales=s))])
    Case("resize_11_sizes_nearest_asymmetric_floor", 11, "Resize",
         {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}).input("x", x).init(
        "roi", empty).init("scales", empty).init("sizes", i64([1, 1, 3, 5])).write(
        [("y", resize_ref(x, "nearest", "asymmetric", "floor", sizes=[1, 1, 3, 5]))])
    Case("resize_11_sizes_linear_align_corners", 11, "Resize",
         {"mode": "linear", "coordinate_transformation_mode": "align_corners"}).input("x", x).init(
        "roi", empty).init("scales", empty).init("sizes", i64([1, 1, 3, 4])).write(
        [("y", resize_ref(x, "linear", "align_corners", sizes=[1, 1, 3, 4]))])
    Case("resize_11_scales_graph_input_nearest", 11, "Resize").input("x", x).init("roi", empty).input(
        "scales", np.array([1, 1, 2, 2], np.float32)).write(
        [("y", resize_ref(x, "nearest", "half_pixel", scales=[1, 1, 2, 2]))])
    roi = [0, 0, 0.25, 0.1, 1, 1, 1.2, 0.8]
    Case("resize_11_tf_crop_and_resize", 11, "Resize",
         {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0}
         ).input("x", xd).init("roi", np.array(roi, np.float32)).init("scales", empty).init(
        "sizes", i64([1, 1, 3, 3])).write(
        [("y", resize_ref(xd, "linear", "tf_crop_and_resize", sizes=[1, 1, 3, 3], roi=roi, extrapolation_value=10))])
    # Resize-13: roi and scales optional.
    Case("resize_13_scales_no_roi", 13, "Resize", {"mode": "linear"}).input("x", x).omit().init(
        "scales", np.array([1, 1, 2.5, 1.5], np.float32)).write(
        [("y", resize_ref(x, "linear", "half_pixel", scales=[1, 1, 2.5, 1.5]))])
    Case("resize_13_sizes_graph_input_round_prefer_ceil", 13, "Resize",
         {"nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "pytorch_half_pixel"}).input(
        "x", x).omit().omit().input("sizes", i64([1, 1, 4, 5])).write(
        [("y", resize_ref(x, "nearest", "pytorch_half_pixel", "round_prefer_ceil", sizes=[1, 1, 4, 5]))])
    # Resize-18: the axes attribute (scales/sizes for the listed axes only).
    Case("resize_18_axes_scales", 18, "Resize", {"axes": [2, 3], "mode": "linear"}).input("x", x).omit().init(
        "scales", np.array([2, 1.5], np.float32)).write(
        [("y", resize_ref(x, "linear", "half_pixel", scales=[1, 1, 2, 1.5]))])
    Case("resize_18_negative_axes_sizes", 18, "Resize", {"axes": [-1]}).input("x", x).omit().omit().init(
        "sizes", i64([5])).write([("y", resize_ref(x, "nearest", "half_pixel", sizes=[1, 1, 2, 5]))])
    Case("resize_18_axes_tf_crop_and_resize", 18, "Resize",
         {"axes": [3], "mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}).input(
        "x", xd).init("roi", np.array([0.1, 0.9], np.float32)).omit().init("sizes", i64([4])).write(
        [("y", resize_ref(xd, "linear", "tf_crop_and_resize", sizes=[1, 1, 4, 4], roi=[0, 0, 0, 0.1, 1, 1, 1, 0.9]))])


def topk_cases():
    reseed("topk_cases")
    x = f32(3, 5)
    v, i = topk(x, 2)
    Case("topk_1_k_attr", 1, "TopK", {"k": 2}).input("x", x).write([("values", v), ("indices", i)])
    v, i = topk(x, 2, axis=0)
    Case("topk_10_k_initializer_axis0", 10, "TopK", {"axis": 0}).input("x", x).init("k", i64([2])).write(
        [("values", v), ("indices", i)])
    v, i = topk(x, 3)
    Case("topk_10_k_graph_input", 10, "TopK").input("x", x).input("k", i64([3])).write(
        [("values", v), ("indices", i)])
    v, i = topk(x, 4, axis=1)
    Case("topk_10_negative_axis", 10, "TopK", {"axis": -1}).input("x", x).const_node("k", i64([4])).write(
        [("values", v), ("indices", i)])
    v, i = topk(x, 2, axis=0, largest=0)
    Case("topk_11_smallest_negative_axis", 11, "TopK", {"axis": -2, "largest": 0}).input("x", x).init(
        "k", i64([2])).write([("values", v), ("indices", i)])
    xt = np.array([[1, 3, 3, 2, 3]], np.float32)  # ties: lower index first
    v, i = topk(xt, 3)
    Case("topk_11_ties_sorted", 11, "TopK", {"sorted": 1}).input("x", xt).init("k", i64([3])).write(
        [("values", v), ("indices", i)])


def batch_norm_cases():
    reseed("batch_norm_cases")
    x = f32(2, 3, 2, 2)
    scale, bias = f32(3), f32(3)
    mean = f32(3)
    var = RNG.uniform(0.5, 2.0, 3).astype(np.float32)

    def params(case, graph_inputs=False):
        for n, v in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
            (case.input if graph_inputs else case.init)(n, v)
        return case

    y = batch_norm(x, scale, bias, mean, var)
    params(Case("batchnorm_6_is_test", 6, "BatchNormalization", {"is_test": 1}).input("x", x)).write([("y", y)])
    params(Case("batchnorm_7_spatial", 7, "BatchNormalization", {"spatial": 1}).input("x", x)).write([("y", y)])
    y2 = batch_norm(x, scale, bias, mean, var, epsilon=1e-2)
    params(Case("batchnorm_9_epsilon", 9, "BatchNormalization", {"epsilon": 1e-2}).input("x", x)).write(
        [("y", y2)])
    x2 = f32(4, 3)
    params(Case("batchnorm_9_rank2", 9, "BatchNormalization").input("x", x2)).write(
        [("y", batch_norm(x2, scale, bias, mean, var))])
    params(Case("batchnorm_14_inference", 14, "BatchNormalization", {"training_mode": 0}).input("x", x),
           graph_inputs=True).write([("y", y)])
    params(Case("batchnorm_15_inference", 15, "BatchNormalization").input("x", x)).write([("y", y)])
    # Training mode (14+): Y from the batch's statistics (population variance over every axis but 1) and the
    # running statistics input * momentum + batch * (1 - momentum).
    momentum = 0.8
    axes = (0, 2, 3)
    batch_mean = x.astype(np.float64).mean(axis=axes)
    batch_var = x.astype(np.float64).var(axis=axes)
    yt = batch_norm(x, scale, bias, batch_mean, batch_var)
    running_mean = (mean * momentum + batch_mean * (1 - momentum)).astype(np.float32)
    running_var = (var * momentum + batch_var * (1 - momentum)).astype(np.float32)
    params(Case("batchnorm_14_training_mode_outputs", 14, "BatchNormalization",
                {"training_mode": 1, "momentum": momentum}).input("x", x)).write(
        [("y", yt), ("running_mean", running_mean), ("running_var", running_var)])
    running_mean = (mean * 0.9 + batch_mean * 0.1).astype(np.float32)  # momentum's default 0.9
    running_var = (var * 0.9 + batch_var * 0.1).astype(np.float32)
    params(Case("batchnorm_15_training_mode_graph_inputs", 15, "BatchNormalization", {"training_mode": 1}).input(
        "x", x), graph_inputs=True).write([("y", yt), ("running_mean", running_mean), ("running_var", running_var)])


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    softmax_family()
    reduce_family()
    squeeze_unsqueeze_split()
    clip()
    pad()
    slice_cases()
    resize_cases()
    topk_cases()
    batch_norm_cases()
    for name, ort in CASES:
        print(f"{name:50s} onnxruntime: {ort}")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"{len(CASES)} cases, {size} bytes in {OUT}")


if __name__ == "__main__":
    main()
