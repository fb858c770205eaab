//===- Checksum.h - CRC32C for artifact sections ----------------*- C++ -*-===//
//
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and
// final xor 0xFFFFFFFF), the checksum of every artifact section. It uses the
// SSE4.2 crc32 instruction when the CPU has it and a slicing-by-8 table
// otherwise; both give the same result.
//
// Stability: internal (the artifact reader and writer); may change in any
// version.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CHECKSUM_H
#define KILN_RUNTIME_CHECKSUM_H

#include <cstddef>
#include <cstdint>

namespace kiln::runtime {

/// The CRC32C of `size` bytes. To checksum data in pieces, pass the previous
/// result as `crc`: crc32c(b, nb, crc32c(a, na)) == crc32c(a ++ b).
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

/// The table-driven implementation, whatever the CPU (for tests).
uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc = 0);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_CHECKSUM_H
