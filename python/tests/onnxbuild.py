"""A tiny hand-rolled protobuf encoder for the ONNX messages the tests need.

Debian's python3 has no protobuf module unless python3-protobuf is installed; the few
ModelProto fields used here (onnx.proto field numbers) are simple enough to write by hand.
"""
import struct

import numpy as np

DTYPE = {np.dtype("float32"): 1, np.dtype("uint8"): 2, np.dtype("int8"): 3, np.dtype("int32"): 6,
         np.dtype("int64"): 7, np.dtype("float64"): 11}


def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def f_int(field, v):
    return _key(field, 0) + _varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + b


def f_float(field, v):
    return _key(field, 5) + struct.pack("<f", v)


def tensor(name, arr):
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9."""
    arr = np.ascontiguousarray(arr)
    out = b"".join(f_int(1, d) for d in arr.shape)
    return out + f_int(2, DTYPE[arr.dtype]) + f_bytes(8, name) + f_bytes(9, arr.tobytes())


def value_info(name, dtype, shape):
    """ValueInfoProto{name=1, type=2: TypeProto{tensor_type=1: {elem_type=1, shape=2}}}; a
    None extent is a dim_param."""
    dims = b""
    for d in shape:
        dims += f_bytes(1, f_int(1, d) if d is not None else f_bytes(2, "N"))
    tt = f_int(1, DTYPE[np.dtype(dtype)]) + f_bytes(2, dims)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tt))


def attr(name, v):
    """AttributeProto: name=1, f=2, i=3, floats=7, ints=8, type=20."""
    if isinstance(v, float):
        return f_bytes(1, name) + f_float(2, v) + f_int(20, 1)
    if isinstance(v, int):
        return f_bytes(1, name) + f_int(3, v) + f_int(20, 2)
    if all(isinstance(x, int) for x in v):
        return f_bytes(1, name) + b"".join(f_int(8, x) for x in v) + f_int(20, 7)
    return f_bytes(1, name) + b"".join(f_float(7, x) for x in v) + f_int(20, 6)


def node(op, inputs, outputs, **attrs):
    """NodeProto: input=1, output=2, op_type=4, attribute=5."""
    out = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    out += f_bytes(4, op)
    return out + b"".join(f_bytes(5, attr(k, v)) for k, v in attrs.items())


def model(nodes, inputs, outputs, initializers=(), opset=13):
    """ModelProto{ir_version=1, graph=7, opset_import=8}; GraphProto{node=1, name=2,
    initializer=5, input=11, output=12}. inputs/outputs: (name, dtype, shape)."""
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, "g")
    g += b"".join(f_bytes(5, tensor(n, a)) for n, a in initializers)
    g += b"".join(f_bytes(11, value_info(*v)) for v in inputs)
    g += b"".join(f_bytes(12, value_info(*v)) for v in outputs)
    return f_int(1, 8) + f_bytes(7, g) + f_bytes(8, f_bytes(1, "") + f_int(2, opset))


def mlp(b=4, k=16, m=8, seed=0):
    """Y = Relu(X.W + C), weights inside the model. Returns (bytes, W, C)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, m)).astype(np.float32)
    c = rng.standard_normal(m).astype(np.float32)
    nodes = [node("MatMul", ["X", "W"], ["H"]), node("Add", ["H", "C"], ["A"]), node("Relu", ["A"], ["Y"])]
    return model(nodes, [("X", "float32", (b, k))], [("Y", "float32", (b, m))],
                 [("W", w), ("C", c)]), w, c
