#!/usr/bin/python3
"""Writes the tiny NumPy fixtures that tests/labels/npy_test.cpp and npz_test.cpp check.

Run with Debian's numpy: /usr/bin/python3 make_fixtures.py (from this directory).
The values here are repeated as literals in the tests; change both together.
"""
import numpy as np

np.save("f32_2x3.npy", np.array([[1.5, -2.0, 3.25], [4.0, 0.0, -0.125]], dtype="<f4"))
np.save("f8_big_endian.npy", np.array([1.0, -2.5, 1e300], dtype=">f8"))
np.save("i4_fortran_2x3.npy", np.asfortranarray(np.array([[1, 2, 3], [4, 5, 6]], dtype="<i4")))
np.save("u5_scalar.npy", np.array("héllo", dtype="<U5"))
np.save("u_list.npy", np.array([["a", "bc"], ["d\"e", "€"]], dtype="<U3"))
np.save("bool_3.npy", np.array([True, False, True]))
np.savez_compressed("two_arrays.npz", labels=np.array([3, 1, 4], dtype="<i8"),
                    boxes=np.array([[0.5, 1.5], [2.5, 3.5]], dtype="<f4"))
np.save("object.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
