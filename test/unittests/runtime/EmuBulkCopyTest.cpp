//===- EmuBulkCopyTest.cpp - TMA and bulk copies on the emulator ----------===//
//
// The tensor maps are built by hand (TensorMap.h, the struct the runtime
// writes on emu). The expected shared-memory images follow the CUDA
// driver's tiled mode (cuTensorMapEncodeTiled): the box is stored densely
// with dimension 0 innermost, elements outside the tensor are zero (or
// NaN with the FMA fill), and a swizzle mode permutes the 16-byte chunks
// of each span as CuTe's Swizzle<B, 4, 3> does (B = 1, 2, 3 for 32, 64,
// 128 bytes) - the pattern wgmma's descriptors read, which the last test
// checks end to end (TMA tiles into wgmma, against a float64 reference).
//
//===----------------------------------------------------------------------===//

#include "EmuDirectTestUtils.h"

#include "emu/TensorMap.h"

#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

uint64_t cuteSwizzle(uint64_t offset, unsigned span) {
  unsigned bits = span == 128 ? 3 : span == 64 ? 2 : span == 32 ? 1 : 0;
  uint64_t yyy = ((1ull << bits) - 1) << 7;
  return offset ^ ((offset & yyy) >> 3);
}

struct MapSpec {
  uint8_t dataType = 1; // CU_TENSOR_MAP_DATA_TYPE_UINT16
  unsigned elem = 2;
  std::vector<uint32_t> dims;    // elements, dimension 0 first
  std::vector<uint64_t> strides; // bytes, dimensions 1..
  std::vector<uint32_t> box;
  unsigned span = 0; // 0, 32, 64, 128
  uint8_t oobFill = 0;
};

emu::EmuTensorMap makeMap(const MapSpec &s, uint64_t address) {
  emu::EmuTensorMap map;
  map.dataType = s.dataType;
  map.rank = static_cast<uint8_t>(s.dims.size());
  map.swizzle = s.span == 32 ? 1 : s.span == 64 ? 2 : s.span == 128 ? 3 : 0;
  map.globalAddress = address;
  for (size_t d = 0; d < s.dims.size(); ++d) {
    map.globalDims[d] = s.dims[d];
    map.boxDims[d] = s.box[d];
    map.elementStrides[d] = 1;
    if (d)
      map.globalStrides[d - 1] = s.strides[d - 1];
  }
  map.oobFill = s.oobFill;
  return map;
}

/// The tensor's bytes: element at (c0, c1, ...) is
/// value(linear element index in a dense walk).
std::vector<uint8_t> makeTensor(const MapSpec &s) {
  uint64_t bytes = s.dims[0] * s.elem;
  if (s.dims.size() > 1)
    bytes = s.strides.back() * s.dims.back();
  std::vector<uint8_t> t(bytes, 0);
  for (uint64_t i = 0; i < bytes; ++i)
    t[i] = static_cast<uint8_t>((i * 37 + 11) % 251 + 1); // never 0
  return t;
}

/// Expected shared image of a box load at `coords`.
std::vector<uint8_t> expectedImage(const MapSpec &s,
                                   const std::vector<uint8_t> &tensor,
                                   const std::vector<int32_t> &coords) {
  uint64_t count = 1;
  for (uint32_t b : s.box)
    count *= b;
  std::vector<uint8_t> image(count * s.elem, 0);
  for (uint64_t linear = 0; linear < count; ++linear) {
    uint64_t rest = linear;
    bool inside = true;
    uint64_t offset = 0;
    for (size_t d = 0; d < s.dims.size(); ++d) {
      int64_t c = coords[d] + static_cast<int64_t>(rest % s.box[d]);
      rest /= s.box[d];
      inside &= c >= 0 && c < s.dims[d];
      offset += d == 0 ? c * s.elem : c * s.strides[d - 1];
    }
    uint64_t at = cuteSwizzle(linear * s.elem, s.span);
    if (inside) {
      std::memcpy(image.data() + at, tensor.data() + offset, s.elem);
    } else if (s.oobFill) {
      uint32_t nan = s.elem == 4 ? 0x7fffffffu : 0x7fffu;
      std::memcpy(image.data() + at, &nan, s.elem);
    }
  }
  return image;
}

/// k(tmap, out, words, coords...): thread 0 loads the box at `coords` into
/// smem with TMA, every thread waits on the mbarrier, then the block
/// copies `words` words of smem to out.
std::string loadKernel(unsigned dims, uint64_t boxBytes) {
  std::string coords;
  for (unsigned d = 0; d < dims; ++d)
    coords += (d ? ", %r" : "%r") + std::to_string(20 + d);
  std::string s = sm90Header() + R"(.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 k_param_1,
	.param .u32 k_param_2,
	.param .align 4 .b8 k_param_3[20]
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	.shared .align 1024 .b8 smem[16384];
	.shared .align 8 .b64 bar;
	mov.u32 	%r0, %tid.x;
	mov.b64 	%rd1, k_param_0;
	cvta.param.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [k_param_1];
	cvta.to.global.u64 	%rd2, %rd2;
	ld.param.u32 	%r2, [k_param_2];
)";
  for (unsigned d = 0; d < dims; ++d)
    s += "\tld.param.u32 \t%r" + std::to_string(20 + d) + ", [k_param_3+" +
         std::to_string(4 * d) + "];\n";
  s +=
      R"(	mov.u32 	%r9, bar;
	mov.u32 	%r10, smem;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_wait;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
	fence.mbarrier_init.release.cluster;
	fence.proxy.async.shared::cta;
	prefetch.tensormap 	[%rd1];
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r9], )" +
      std::to_string(boxBytes) + R"(;
	cp.async.bulk.tensor.)" +
      std::to_string(dims) +
      "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \t[%r10], [" +
      std::string("%rd1") + ", {" + coords + R"(}], [%r9];
$L_wait:
	bar.sync 	0;
$L_spin:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r9], 0;
	@!%p2 bra 	$L_spin;
	mov.u32 	%r1, %r0;
$L_copy:
	setp.ge.u32 	%p3, %r1, %r2;
	@%p3 bra 	$L_end;
	shl.b32 	%r3, %r1, 2;
	add.s32 	%r4, %r10, %r3;
	ld.shared.u32 	%r5, [%r4];
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r5;
	add.u32 	%r1, %r1, 128;
	bra 	$L_copy;
$L_end:
	ret;
}
)";
  return s;
}

std::string runLoad(const MapSpec &spec, const std::vector<int32_t> &coords) {
  DirectMemory memory;
  std::vector<uint8_t> tensor = makeTensor(spec);
  size_t iTensor = memory.add(tensor);
  uint64_t boxBytes = spec.elem;
  for (uint32_t b : spec.box)
    boxBytes *= b;
  size_t iOut = memory.add(std::vector<uint8_t>(boxBytes, 0xcd));
  emu::EmuTensorMap map = makeMap(spec, DirectMemory::address(iTensor));
  ParamBytes params;
  params.add(&map, sizeof(map), 64);
  params.addU64(DirectMemory::address(iOut));
  params.addU32(static_cast<uint32_t>(boxBytes / 4));
  std::vector<int32_t> c = coords;
  c.resize(5, 0);
  params.add(c.data(), 20, 4);
  DirectResult result = runDirect(
      loadKernel(static_cast<unsigned>(spec.dims.size()), boxBytes), {1, 1, 1},
      {128, 1, 1}, params, memory, 0, false, /*checkShared=*/true);
  if (result.error != "<success>")
    return result.error;
  std::vector<uint8_t> want = expectedImage(spec, tensor, coords);
  EXPECT_EQ(memory.buffers[iOut].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (memory.buffers[iOut][i] != want[i])
      return "byte " + std::to_string(i) + " of the box is " +
             std::to_string(memory.buffers[iOut][i]) + ", want " +
             std::to_string(want[i]);
  return "<success>";
}

TEST(EmuBulkCopyTest, TensorLoad2DSwizzle128WithOutOfBoundsRowsAndColumns) {
  MapSpec s;
  s.dims = {100, 40};
  s.strides = {256};
  s.box = {64, 8};
  s.span = 128;
  EXPECT_EQ(runLoad(s, {-8, 36}), "<success>");
  EXPECT_EQ(runLoad(s, {40, 0}), "<success>");
}

TEST(EmuBulkCopyTest, TensorLoad1DNoSwizzleNaNFill) {
  MapSpec s;
  s.dataType = 7; // f32
  s.elem = 4;
  s.dims = {50};
  s.box = {32};
  s.oobFill = 1;
  EXPECT_EQ(runLoad(s, {30}), "<success>");
}

TEST(EmuBulkCopyTest, TensorLoad3DSwizzle32) {
  MapSpec s;
  s.dims = {32, 4, 7};
  s.strides = {64, 64 * 4};
  s.box = {16, 4, 2};
  s.span = 32;
  // Rows 1..4 (4 is outside), planes 5..6: data on both sides of the
  // 128-byte line the 32-byte swizzle alternates on.
  EXPECT_EQ(runLoad(s, {8, 1, 5}), "<success>");
}

TEST(EmuBulkCopyTest, TensorLoad2DSwizzle64F32) {
  MapSpec s;
  s.dataType = 7;
  s.elem = 4;
  s.dims = {20, 9};
  s.strides = {96};
  s.box = {16, 8};
  s.span = 64;
  EXPECT_EQ(runLoad(s, {12, 3}), "<success>");
}

TEST(EmuBulkCopyTest, TensorLoad5D) {
  MapSpec s;
  s.dims = {8, 2, 2, 2, 3};
  s.strides = {16, 32, 64, 128};
  s.box = {8, 2, 2, 1, 2};
  EXPECT_EQ(runLoad(s, {0, 1, 0, 1, 2}), "<success>");
}

TEST(EmuBulkCopyTest, BadTensorMapsFault) {
  MapSpec s;
  s.dims = {64, 8};
  s.strides = {128};
  s.box = {64, 8};
  DirectMemory memory;
  size_t iTensor = memory.add(makeTensor(s));
  size_t iOut = memory.add(std::vector<uint8_t>(1024, 0));
  auto run = [&](emu::EmuTensorMap map, unsigned dims) {
    ParamBytes params;
    params.add(&map, sizeof(map), 64);
    params.addU64(DirectMemory::address(iOut));
    params.addU32(0);
    std::vector<int32_t> c(5, 0);
    params.add(c.data(), 20, 4);
    return runDirect(loadKernel(dims, 1024), {1, 1, 1}, {128, 1, 1}, params,
                     memory)
        .error;
  };
  emu::EmuTensorMap map = makeMap(s, DirectMemory::address(iTensor));
  map.magic = 0x12345678;
  std::string error = run(map, 2);
  EXPECT_THAT(error, HasSubstr("kernel 'k', block (0,0,0), thread (0,0,0), "
                               "PTX line 34 (cp.async.bulk.tensor.2d"));
  EXPECT_THAT(error, HasSubstr("the tensor map at parameter offset 0 is not "
                               "one the emulator wrote (magic "
                               "0x12345678"));
  map = makeMap(s, DirectMemory::address(iTensor));
  EXPECT_THAT(run(map, 3), HasSubstr("bad tensor map: it has rank 2, the "
                                     "copy is 3d"));
  map.swizzle = 2; // 64B, but the box rows are 128 bytes
  EXPECT_THAT(run(map, 2), HasSubstr("exceeds the 64-byte swizzle span"));
  map = makeMap(s, DirectMemory::address(iTensor));
  map.elementStrides[1] = 2;
  EXPECT_THAT(run(map, 2), HasSubstr("element stride 2 in dimension 1"));
  map = makeMap(s, DirectMemory::address(iTensor));
  map.globalStrides[0] = 4096; // rows past the allocation
  EXPECT_THAT(run(map, 2), HasSubstr("is out of bounds"));
}

// A TMA store writes the box's in-bounds elements from the swizzled
// shared image; a bulk load and store move plain bytes.
TEST(EmuBulkCopyTest, TensorStoreAndBulkCopies) {
  MapSpec s;
  s.dims = {70, 10};
  s.strides = {160};
  s.box = {64, 4};
  s.span = 128;
  const int32_t c0 = 32, c1 = 8; // columns 32..95 (70..95 outside), rows 8..11
  std::string ptx = sm90Header() + R"(.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 k_param_1,
	.param .u64 k_param_2
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	.shared .align 1024 .b8 smem[1024];
	.shared .align 8 .b64 bar;
	mov.u32 	%r0, %tid.x;
	mov.b64 	%rd1, k_param_0;
	cvta.param.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [k_param_1];
	ld.param.u64 	%rd3, [k_param_2];
	mov.u32 	%r9, bar;
	mov.u32 	%r10, smem;
	// smem word i = 1000 + i, one word per thread and pass.
	mov.u32 	%r1, %r0;
$L_fill:
	setp.ge.u32 	%p1, %r1, 128;
	@%p1 bra 	$L_filled;
	add.u32 	%r2, %r1, 1000;
	shl.b32 	%r3, %r1, 2;
	add.s32 	%r4, %r10, %r3;
	st.shared.u32 	[%r4], %r2;
	add.u32 	%r1, %r1, 128;
	bra 	$L_fill;
$L_filled:
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	setp.ne.u32 	%p2, %r0, 0;
	@%p2 bra 	$L_end;
	cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group 	[%rd1, {)" +
                    std::to_string(c0) + ", " + std::to_string(c1) +
                    R"(}], [%r10];
	cp.async.bulk.commit_group;
	cp.async.bulk.wait_group.read 	0;
	// The same 512 bytes out to aux[0..512), then bulk-loaded back from
	// aux[512..1024) into smem, then stored to aux[1024..1536).
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd3], [%r10], 512;
	cp.async.bulk.commit_group;
	cp.async.bulk.wait_group 	0;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r9], 256;
	add.s64 	%rd4, %rd3, 512;
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes 	[%r10], [%rd4], 256, [%r9];
$L_spin:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [%r9], 0;
	@!%p3 bra 	$L_spin;
	add.s64 	%rd5, %rd3, 1024;
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd5], [%r10], 512;
$L_end:
	ret;
}
)";
  DirectMemory memory;
  std::vector<uint8_t> tensor = makeTensor(s);
  size_t iTensor = memory.add(tensor);
  std::vector<uint8_t> aux(1536, 0);
  for (unsigned i = 512; i < 768; ++i)
    aux[i] = static_cast<uint8_t>(i * 3);
  size_t iAux = memory.add(aux);
  emu::EmuTensorMap map = makeMap(s, DirectMemory::address(iTensor));
  ParamBytes params;
  params.add(&map, sizeof(map), 64);
  params.addU64(DirectMemory::address(iTensor));
  params.addU64(DirectMemory::address(iAux));
  DirectResult result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory);
  ASSERT_EQ(result.error, "<success>");
  // The shared image as the threads wrote it.
  std::vector<uint8_t> smem(512);
  for (uint32_t i = 0; i < 128; ++i) {
    uint32_t v = 1000 + i;
    std::memcpy(smem.data() + 4 * i, &v, 4);
  }
  std::vector<uint8_t> want = tensor;
  for (uint32_t r = 0; r < s.box[1]; ++r)
    for (uint32_t e = 0; e < s.box[0]; ++e) {
      uint32_t col = c0 + e, row = c1 + r;
      if (col >= s.dims[0] || row >= s.dims[1])
        continue;
      uint64_t linear = r * s.box[0] + e;
      std::memcpy(want.data() + row * s.strides[0] + col * s.elem,
                  smem.data() + cuteSwizzle(linear * s.elem, s.span), s.elem);
    }
  EXPECT_EQ(memory.buffers[iTensor], want);
  std::vector<uint8_t> auxOut = memory.buffers[iAux];
  EXPECT_TRUE(std::equal(smem.begin(), smem.end(), auxOut.begin()));
  // smem after the bulk load: aux[512..768) then the rest of the image.
  std::vector<uint8_t> reloaded = smem;
  std::memcpy(reloaded.data(), aux.data() + 512, 256);
  EXPECT_TRUE(
      std::equal(reloaded.begin(), reloaded.end(), auxOut.begin() + 1024));
}

// The pattern of an sm_90 GEMM main loop: TMA loads 128B-swizzled K-major
// tiles of A (64 x 64) and B (N = 64 rows of K = 64), an mbarrier waits
// for both, four wgmma k16 steps read them through descriptors advanced by
// 32 bytes. Without the wait, the wgmma reads a box still in flight.
TEST(EmuBulkCopyTest, TmaTilesFeedWgmma) {
  for (bool wait : {true, false}) {
    std::string d;
    for (unsigned i = 0; i < 32; ++i)
      d += (i ? ", %f" : "%f") + std::to_string(i);
    std::string mma;
    for (unsigned s = 0; s < 4; ++s)
      mma += "\tadd.s64 \t%rd20, %rd10, " + std::to_string(2 * s) +
             ";\n\tadd.s64 \t%rd21, %rd11, " + std::to_string(2 * s) +
             ";\n\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 \t{" +
             d + "}, %rd20, %rd21, " + (s ? "%p4" : "%p5") + ", 1, 1, 0, 0;\n";
    std::string ptx =
        sm90Header() + R"(.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .align 64 .b8 k_param_1[128],
	.param .u64 k_param_2
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<32>;
	.reg .f32 	%f<40>;
	.shared .align 1024 .b8 smem[16384];
	.shared .align 8 .b64 bar;
	mov.u32 	%r0, %tid.x;
	mov.b64 	%rd12, k_param_0;
	cvta.param.u64 	%rd12, %rd12;
	mov.b64 	%rd13, k_param_1;
	cvta.param.u64 	%rd13, %rd13;
	ld.param.u64 	%rd2, [k_param_2];
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r9, bar;
	mov.u32 	%r10, smem;
	add.u32 	%r11, %r10, 8192;
	setp.ne.u32 	%p1, %r0, 0;
	@%p1 bra 	$L_wait;
	mbarrier.init.shared::cta.b64 	[%r9], 1;
	fence.mbarrier_init.release.cluster;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r9], 16384;
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes 	[%r10], [%rd12, {0, 0}], [%r9];
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes 	[%r11], [%rd13, {0, 0}], [%r9];
$L_wait:
	bar.sync 	0;
)" +
        std::string(wait ? R"($L_spin:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r9], 0;
	@!%p2 bra 	$L_spin;
)"
                         : "") +
        R"(	// Descriptors: start >> 4, LBO 16 (unused), SBO 1024, 128B swizzle.
	cvt.u64.u32 	%rd10, %r10;
	shr.u64 	%rd10, %rd10, 4;
	or.b64 	%rd10, %rd10, 4611686293305360384;
	cvt.u64.u32 	%rd11, %r11;
	shr.u64 	%rd11, %rd11, 4;
	or.b64 	%rd11, %rd11, 4611686293305360384;
	setp.eq.u32 	%p4, %r0, %r0;
	setp.ne.u32 	%p5, %r0, %r0;
	wgmma.fence.sync.aligned;
)" + mma +
        R"(	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	mul.wide.u32 	%rd3, %r0, 128;
	add.s64 	%rd4, %rd2, %rd3;
)";
    for (unsigned i = 0; i < 32; ++i)
      ptx += "\tst.global.f32 \t[%rd4+" + std::to_string(4 * i) + "], %f" +
             std::to_string(i) + ";\n";
    ptx += "\tret;\n}\n";
    // A[m][k] and B stored as Bt[n][k] (K-major), bf16, row-major.
    auto bf16 = [](double v) {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return static_cast<uint16_t>(bits >> 16);
    };
    auto aValue = [](unsigned m, unsigned k) {
      return double((m * 5 + k * 3) % 9) - 4;
    };
    auto bValue = [](unsigned k, unsigned n) {
      return double((k * 7 + n) % 5) - 2;
    };
    std::vector<uint16_t> a(64 * 64), bt(64 * 64);
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned k = 0; k < 64; ++k) {
        a[m * 64 + k] = bf16(aValue(m, k));
        bt[m * 64 + k] = bf16(bValue(k, m));
      }
    DirectMemory memory;
    size_t iA = memory.add(a), iB = memory.add(bt);
    size_t iD = memory.add(std::vector<float>(128 * 32, -1.0f));
    MapSpec s;
    s.dataType = 9; // bf16
    s.dims = {64, 64};
    s.strides = {128};
    s.box = {64, 64};
    s.span = 128;
    emu::EmuTensorMap mapA = makeMap(s, DirectMemory::address(iA));
    emu::EmuTensorMap mapB = makeMap(s, DirectMemory::address(iB));
    ParamBytes params;
    params.add(&mapA, sizeof(mapA), 64);
    params.add(&mapB, sizeof(mapB), 64);
    params.addU64(DirectMemory::address(iD));
    DirectResult result = runDirect(ptx, {1, 1, 1}, {128, 1, 1}, params, memory,
                                    0, /*countPerformance=*/true);
    if (!wait) {
      EXPECT_THAT(result.error, HasSubstr("which a bulk/TMA copy has not "
                                          "written yet"));
      continue;
    }
    ASSERT_EQ(result.error, "<success>");
    std::vector<float> out = memory.as<float>(iD);
    unsigned wrong = 0;
    for (unsigned t = 0; t < 128 && wrong < 5; ++t)
      for (unsigned i = 0; i < 32; ++i) {
        unsigned row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
        unsigned col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
        double want = 0;
        for (unsigned k = 0; k < 64; ++k)
          want += aValue(row, k) * bValue(k, col);
        if (out[t * 32 + i] != static_cast<float>(want)) {
          ADD_FAILURE() << "D(" << row << ", " << col
                        << ") = " << out[t * 32 + i] << ", want " << want;
          ++wrong;
        }
      }
    // TMA wrote 16 KiB; wgmma read A (8 KiB) and B (8 KiB) four times
    // over in k16 slices: 2 * 64 * 16 * 2 bytes per step.
    EXPECT_EQ(result.stats.asyncSharedBytes, 16384u + 4 * (2048u + 2048u));
    EXPECT_EQ(result.stats.mmaFlops, 4ull * 2 * 64 * 64 * 16);
  }
}

} // namespace
