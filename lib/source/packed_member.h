#pragma once
// Unpacking a member on the worker that processes its sample: a zip member is checked against
// the CRC-32 and size its central directory declares, and a deflated one inflated first (with
// libdeflate, never past the declared size: a zip bomb stops there).
#include <cstdint>

#include "source/member.h"

namespace tarmac {

/// True when `m` must be unpacked before its bytes are used.
inline bool is_packed(const Member& m) {
  return m.packing != Packing::Plain;
}

/// The member with its bytes as they are meant: `m` itself when plain or stored (a stored member
/// checked), else `scratch`, filled with the name and the inflated bytes. Throws SampleError
/// (corrupt_member, unsupported_member) saying why; the caller names the archive and member.
const Member& unpack_member(const Member& m, Member& scratch);

}  // namespace tarmac
