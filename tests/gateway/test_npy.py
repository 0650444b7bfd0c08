"""The gateway's own .npy reader and writer agree with numpy's, byte for byte, and refuse what numpy refuses."""

from __future__ import annotations

import io

import numpy as np
import pytest

from hub.errors import HubError
from hub.gateway import tensors

ARRAYS = [
    np.random.default_rng(0).standard_normal((1, 784)).astype(np.float32),
    np.arange(12, dtype=">i4").reshape(3, 4),  # big endian
    np.array(3.5),  # 0-d
    np.zeros((0, 3)),
    np.ones((2, 3, 4), bool),
    np.arange(300, dtype=np.uint8),
    np.arange(24, dtype=np.int64).reshape(2, 3, 4)[:, ::2],  # not contiguous
]


def saved(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype.str}{list(a.shape)}")
def test_written_like_numpy_and_read_back_without_np_load(array):
    assert tensors.write_npy(array) == saved(array)
    fast = tensors._read_simple_npy(saved(array))
    assert fast is not None and fast.dtype == array.dtype and fast.shape == array.shape
    np.testing.assert_array_equal(fast, array)
    np.testing.assert_array_equal(tensors.read_npy(tensors.write_npy(array)), array)


def test_anything_unusual_goes_through_np_load():
    fortran = saved(np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    assert tensors._read_simple_npy(fortran) is None
    np.testing.assert_array_equal(tensors.read_npy(fortran), np.arange(6.0).reshape(2, 3))
    text = saved(np.array(["a", "bc"]))
    assert tensors._read_simple_npy(text) is None and tensors.read_npy(text).tolist() == ["a", "bc"]


@pytest.mark.parametrize("body", [
    saved(np.zeros((4, 4), np.float32))[:-3],  # cut short
    saved(np.array([{"a": 1}], dtype=object)),  # would need pickle
    b"\x93NUMPY\x01\x00\xff\xff{'descr'",
    b"not an array",
])
def test_damaged_or_pickled_bodies_are_refused(body):
    with pytest.raises(HubError) as error:
        tensors.read_npy(body)
    assert error.value.error_code == "invalid_inputs"


def test_a_pickled_body_is_refused_without_numpy_s_advice_to_load_it_unsafely():
    with pytest.raises(HubError) as error:
        tensors.read_npy(saved(np.array([{"a": 1}], dtype=object)))
    assert "never loads" in error.value.message and "unsafe" not in error.value.message


@pytest.mark.parametrize("value, words", [(["a", "b"], "not text"), ([1, None], "not mixed values")])
def test_json_inputs_that_are_not_numbers_are_named_in_words(value, words):
    spec = [{"name": "x", "type": "tensor(float)", "shape": [None]}]
    with pytest.raises(HubError) as error:
        tensors._json_array("x", value, np.dtype(np.float32), spec)
    assert words in error.value.message and "str" not in error.value.message
