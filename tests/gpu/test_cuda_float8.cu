// Float8 on a GPU against the CPU: the casts of kernels/cuda/float8.cuh (scales, codes and
// dequantized values for both FP8 types, every granularity and scale rounding; exact: maxima,
// the CPU's scale function, the shared casts; the codes also cast and transposed in one
// pass; both rowwise casts of one tensor from two reads, cuda::f8_codes_both), the kernel
// backend's FP8 all-gather casts
// (cuda_kernels::abs_max / f8_quantize / f8_dequantize against cpu_kernels', exact), the
// transpose of FP8 codes (exact), and the cuBLASLt FP8 GEMMs -- forward with tensorwise and
// rowwise scales, the backward's grad_input and grad_weight with each recipe's casts -- within
// 2e-3 of the CPU's f32 GEMM of the dequantized values (the same products, accumulated by FP8
// tensor cores in another order; the reciprocal scales round once more); and the Float8 linears
// as a group on one input equal to one by one, exactly, and to the CPU's emulation (2e-3; on
// the emulation also that rowwise runs each output gradient's casts as one f8_codes_both).
// FP8 GEMMs need sm_89
// (rowwise scales sm_90); older GPUs skip them, saying so. Without a GPU: exit 77 (skipped).
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/float8_linear.hpp>
#include <tessera/kernels/cpu/matmul.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/kernels/cuda/float8.cuh>
#include <tessera/kernels/cuda/float8_linear.cuh>
#include <tessera/kernels/cuda/gemm.hpp>
#include <tessera/kernels/linears.hpp>

#include "cuda_checks.cuh"

using namespace tessera;

namespace {
using namespace tessera::testing;

void float8() {
  const std::int64_t rows = 33, cols = 300;
  auto x = randn(static_cast<std::size_t>(rows * cols), 30, 4.0f);
  x[7] = 1e4f, x[500] = -3e-9f;  // saturating and subnormal codes
  for (dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (cpu::f8_granularity gr : {cpu::f8_granularity::tensorwise, cpu::f8_granularity::per_row,
                                   cpu::f8_granularity::per_column})
      for (cpu::f8_scale_rounding rd : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
        const cpu::f8_cast c{target, gr, rd};
        const std::int64_t n = cpu::f8_scale_count(gr, rows, cols);
        std::vector<float> scales(static_cast<std::size_t>(n)), back(x.size());
        std::vector<std::uint8_t> bits(x.size());
        cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
        cpu::f8_quantize(bits.data(), x.data(), scales.data(), rows, cols, c);
        cpu::f8_dequantize(back.data(), bits.data(), scales.data(), rows, cols, c);
        dvec dx(x), dscales{std::vector<float>(scales.size())}, dback{std::vector<float>(back.size())};
        tensor<float, cuda_space> dbits({static_cast<std::int64_t>((bits.size() + 3) / 4)});  // the codes' bytes
        auto* db = reinterpret_cast<std::uint8_t*>(dbits.data());
        cuda::f8_scales(dscales.get(), dx.get(), rows, cols, c);
        cuda::f8_quantize(db, dx.get(), dscales.get(), rows, cols, c);
        cuda::f8_dequantize(dback.get(), db, dscales.get(), rows, cols, c);
        std::vector<std::uint8_t> gbits(bits.size());
        copy_to_host(gbits.data(), db, gbits.size());
        const std::string what = std::string("float8 ") + std::string(short_name(target)) +
                                 (gr == cpu::f8_granularity::tensorwise ? " tensorwise"
                                  : gr == cpu::f8_granularity::per_row ? " per row" : " per column") +
                                 (rd == cpu::f8_scale_rounding::power_of_two ? ", pow2" : "");
        expect_close((what + ": scales").c_str(), dscales.host(), scales, 0);
        expect_close((what + ": codes").c_str(), std::vector<float>(gbits.begin(), gbits.end()),
                     std::vector<float>(bits.begin(), bits.end()), 0);
        expect_close((what + ": dequantized").c_str(), dback.host(), back, 0);
        for (const auto path : {cuda::f8_transpose_path::elements, cuda::f8_transpose_path::fours}) {
          cuda::set_f8_transpose_path(path);  // cast and transposed in one pass, a float or 4 a load
          cuda::f8_quantize_transposed(db, dx.get(), dscales.get(), rows, cols, c);
          copy_to_host(gbits.data(), db, gbits.size());
          std::vector<float> want_t(bits.size()), got_t(bits.size());
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < cols; ++k) {
              want_t[static_cast<std::size_t>(k * rows + r)] = bits[static_cast<std::size_t>(r * cols + k)];
              got_t[static_cast<std::size_t>(k * rows + r)] = gbits[static_cast<std::size_t>(k * rows + r)];
            }
          expect_close((what + ": codes cast and transposed in one pass" +
                        (path == cuda::f8_transpose_path::fours ? " (by fours)" : ""))
                           .c_str(),
                       got_t, want_t, 0);
        }
        cuda::set_f8_transpose_path(cuda::f8_transpose_path::elements);
        cuda::f8_codes(db, dscales.get(), dx.get(), rows, cols, c, cpu::f8_local_amax{});  // the GEMMs' codes
        copy_to_host(gbits.data(), db, gbits.size());
        std::vector<float> inverse;
        for (float v : scales) inverse.push_back(1.0f / v);
        expect_close((what + ": f8_codes' codes").c_str(), std::vector<float>(gbits.begin(), gbits.end()),
                     std::vector<float>(bits.begin(), bits.end()), 0);
        expect_close((what + ": f8_codes' inverse scales").c_str(), dscales.host(), inverse, 0);
      }
}
/// cuda::f8_codes_both: x's codes scaled by row and, transposed, by column, with both sets of
/// inverse scales, from two reads of x -- equal to the CPU's codes and scales of each cast
/// exactly: both FP8 types either way, both scale roundings, shapes whole tiles and not
/// (4-float groups and single floats), and a row and a column of zeros.
void float8_both() {
  using shape = std::pair<std::int64_t, std::int64_t>;
  for (const auto path : {cuda::f8_transpose_path::elements, cuda::f8_transpose_path::fours}) {
    for (const auto& [rows, cols] : {shape{33, 300}, shape{128, 96}, shape{130, 64}, shape{64, 37}, shape{1, 1}}) {
      cuda::set_f8_transpose_path(path);  // a float or 4 a load (where the columns allow)
      std::vector<float> got_rows, want_rows, got_t, want_t, got_inverse, want_inverse;  // every cast pair's, in turn
      for (const dtype row_target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
        for (const dtype col_target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
          for (const auto rd : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
            auto x = randn(static_cast<std::size_t>(rows * cols), 31, 4.0f);
            x[0] = 1e4f;  // a saturating code
            if (rows > 2 && cols > 2) {
              for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(2 * cols + c)] = 0.0f;  // row 2
              for (std::int64_t r = 0; r < rows; ++r) x[static_cast<std::size_t>(r * cols + 1)] = 0.0f;  // column 1
            }
            const cpu::f8_cast by_row{row_target, cpu::f8_granularity::per_row, rd},
                by_col{col_target, cpu::f8_granularity::per_column, rd};
            std::vector<float> rs(static_cast<std::size_t>(rows)), cs(static_cast<std::size_t>(cols));
            std::vector<std::uint8_t> rb(x.size()), cb(x.size());
            cpu::f8_scales(rs.data(), x.data(), rows, cols, by_row);
            cpu::f8_scales(cs.data(), x.data(), rows, cols, by_col);
            cpu::f8_quantize(rb.data(), x.data(), rs.data(), rows, cols, by_row);
            cpu::f8_quantize(cb.data(), x.data(), cs.data(), rows, cols, by_col);
            want_rows.insert(want_rows.end(), rb.begin(), rb.end());
            for (std::int64_t c = 0; c < cols; ++c)
              for (std::int64_t r = 0; r < rows; ++r) want_t.push_back(cb[static_cast<std::size_t>(r * cols + c)]);
            for (float v : rs) want_inverse.push_back(1.0f / v);
            for (float v : cs) want_inverse.push_back(1.0f / v);
            dvec dx(x), dinv{std::vector<float>(rs.size() + cs.size())};
            dbytes dbits(x.size()), dbits_t(x.size());
            cuda::f8_codes_both(dbits.get(), dbits_t.get(), dinv.get(), dx.get(), rows, cols, by_row, by_col);
            std::vector<std::uint8_t> got(x.size());
            copy_to_host(got.data(), dbits.get(), got.size());
            got_rows.insert(got_rows.end(), got.begin(), got.end());
            copy_to_host(got.data(), dbits_t.get(), got.size());
            got_t.insert(got_t.end(), got.begin(), got.end());
            const auto inv = dinv.host();
            got_inverse.insert(got_inverse.end(), inv.begin(), inv.end());
          }
      const std::string what = "f8_codes_both " + std::to_string(rows) + " x " + std::to_string(cols) +
                               (path == cuda::f8_transpose_path::fours ? " (by fours)" : "");
      expect_close((what + ": codes by row").c_str(), got_rows, want_rows, 0);
      expect_close((what + ": codes by column, transposed").c_str(), got_t, want_t, 0);
      expect_close((what + ": inverse scales").c_str(), got_inverse, want_inverse, 0);
    }
  }
  cuda::set_f8_transpose_path(cuda::f8_transpose_path::elements);
}
/// An operand through an FP8 cast on the CPU: its codes, its dequantized values, and the
/// inverse scales the GPU's GEMM takes.
struct f8_host_operand {
  std::vector<std::uint8_t> codes;
  std::vector<float> values, inverse_scales;
  cudaDataType_t type;
  f8_host_operand(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const cpu::f8_cast& c)
      : codes(x.size()), values(x.size()), type(c.target == dtype::f8_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3) {
    std::vector<float> scales(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, rows, cols)));
    cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
    cpu::f8_quantize(codes.data(), x.data(), scales.data(), rows, cols, c);
    cpu::f8_dequantize(values.data(), codes.data(), scales.data(), rows, cols, c);
    for (float v : scales) inverse_scales.push_back(1.0f / v);
  }
};

/// The backward's FP8 GEMMs (grad_input, grad_weight; accumulating onto 0.25) with each
/// recipe's casts (f8_linear_casts_of), against the CPU's emulation; and f8_transpose (exact).
void gemm_f8_backward(std::int64_t N, std::int64_t C, std::int64_t OC, const std::vector<float>& x,
                      const std::vector<float>& w, int sm) {
  const auto dy = randn(static_cast<std::size_t>(N * OC), 52, 0.5f);
  cuda::blas b;
  {  // the transpose
    std::vector<std::uint8_t> in(static_cast<std::size_t>(70 * 45)), want(in.size()), got(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 31 + 7);
    for (std::int64_t r = 0; r < 70; ++r)
      for (std::int64_t c = 0; c < 45; ++c) want[static_cast<std::size_t>(c * 70 + r)] = in[static_cast<std::size_t>(r * 45 + c)];
    dbytes din(in), dout(in.size());
    cuda::f8_transpose(dout.get(), din.get(), 70, 45);
    copy_to_host(got.data(), dout.get(), got.size());
    expect_close("FP8 codes: transpose (70 x 45)", std::vector<float>(got.begin(), got.end()),
                 std::vector<float>(want.begin(), want.end()), 0);
  }
  for (const f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise}) {
    const bool rowwise = r == f8_recipe::rowwise;
    if (rowwise && sm < 90) continue;  // outer-vector scales: sm_90 and newer (reported above)
    const cpu::f8_linear_casts c = cpu::f8_linear_casts_of(r);
    const std::string name = rowwise ? " (rowwise)" : " (tensorwise)";
    // grad_input: dinp += q(dy) . q(w)
    const f8_host_operand gy(dy, N, OC, *c.grad_output), gw(w, OC, C, *c.weight_for_grad_input);
    std::vector<float> want(static_cast<std::size_t>(N * C), 0.25f);
    cpu::matmul_backward(want.data(), nullptr, nullptr, gy.values.data(), nullptr, gw.values.data(), N, C, OC);
    dbytes dgy(gy.codes), dgw(gw.codes), dgw_t(gw.codes.size());
    cuda::f8_transpose(dgw_t.get(), dgw.get(), OC, C);
    dvec sy(gy.inverse_scales), sw(gw.inverse_scales), dinp{std::vector<float>(want.size(), 0.25f)};
    cuda::matmul_grad_input_f8(b, dinp.get(), dgy.get(), gy.type, sy.get(), dgw_t.get(), gw.type, sw.get(), N, C, OC,
                               rowwise);
    expect_close(("cuBLASLt FP8 grad_input" + name).c_str(), dinp.host(), want, 2e-3);
    // grad_weight: dw += q(dy)^T . q(x)
    const f8_host_operand hy(dy, N, OC, *c.grad_output_for_grad_weight), hx(x, N, C, *c.input_for_grad_weight);
    std::vector<float> want_w(static_cast<std::size_t>(OC * C), 0.25f);
    cpu::matmul_backward(nullptr, want_w.data(), nullptr, hy.values.data(), hx.values.data(), nullptr, N, C, OC);
    dbytes dhy(hy.codes), dhx(hx.codes), dhy_t(hy.codes.size()), dhx_t(hx.codes.size());
    cuda::f8_transpose(dhy_t.get(), dhy.get(), N, OC);
    cuda::f8_transpose(dhx_t.get(), dhx.get(), N, C);
    dvec ty(hy.inverse_scales), tx(hx.inverse_scales), dw{std::vector<float>(want_w.size(), 0.25f)};
    cuda::matmul_grad_weight_f8(b, dw.get(), dhy_t.get(), hy.type, ty.get(), dhx_t.get(), hx.type, tx.get(), N, C, OC,
                                rowwise);
    expect_close(("cuBLASLt FP8 grad_weight" + name).c_str(), dw.host(), want_w, 2e-3);
  }
}

void gemm_f8(int sm) {
  if (sm < 89) {
    std::printf("%-40s skipped (sm_%d: FP8 GEMMs need sm_89 or newer)\n", "cuBLASLt FP8 GEMMs", sm);
    return;
  }
  const std::int64_t N = 64, C = 128, OC = 96;  // multiples of 16, as cuBLASLt's FP8 needs
  const auto x = randn(static_cast<std::size_t>(N * C), 50), w = randn(static_cast<std::size_t>(OC * C), 51, 0.1f);
  cuda::blas b;
  for (const bool rowwise : {false, true}) {
    if (rowwise && sm < 90) {
      std::printf("%-40s skipped (sm_%d: outer-vector scales need sm_90 or newer)\n", "cuBLASLt FP8 GEMM (rowwise)", sm);
      continue;
    }
    const cpu::f8_cast c{dtype::f8_e4m3fn, rowwise ? cpu::f8_granularity::per_row : cpu::f8_granularity::tensorwise,
                         cpu::f8_scale_rounding::none};
    // the CPU's emulation: quantize, dequantize, f32 GEMM
    std::vector<float> sx(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, N, C))),
        sw(static_cast<std::size_t>(cpu::f8_scale_count(c.granularity, OC, C))), xd(x.size()), wd(w.size()),
        want(static_cast<std::size_t>(N * OC));
    std::vector<std::uint8_t> xb(x.size()), wb(w.size());
    cpu::f8_scales(sx.data(), x.data(), N, C, c);
    cpu::f8_scales(sw.data(), w.data(), OC, C, c);
    cpu::f8_quantize(xb.data(), x.data(), sx.data(), N, C, c);
    cpu::f8_quantize(wb.data(), w.data(), sw.data(), OC, C, c);
    cpu::f8_dequantize(xd.data(), xb.data(), sx.data(), N, C, c);
    cpu::f8_dequantize(wd.data(), wb.data(), sw.data(), OC, C, c);
    cpu::matmul_forward(want.data(), xd.data(), wd.data(), nullptr, N, C, OC);
    // the GPU: the same codes, the dequantization scales 1 / scale
    std::vector<float> ix(sx.size()), iw(sw.size());
    for (std::size_t i = 0; i < sx.size(); ++i) ix[i] = 1.0f / sx[i];
    for (std::size_t i = 0; i < sw.size(); ++i) iw[i] = 1.0f / sw[i];
    tensor<float, cuda_space> codes({(N * C + OC * C + 3) / 4});
    auto* dxb = reinterpret_cast<std::uint8_t*>(codes.data());
    std::uint8_t* dwb = dxb + N * C;
    copy_to_device(dxb, xb.data(), xb.size());
    copy_to_device(dwb, wb.data(), wb.size());
    dvec dix(ix), diw(iw), dout{std::vector<float>(want.size())};
    cuda::matmul_forward_f8(b, dout.get(), dxb, CUDA_R_8F_E4M3, dix.get(), dwb, CUDA_R_8F_E4M3, diw.get(), N, C, OC,
                            rowwise);
    expect_close(rowwise ? "cuBLASLt FP8 GEMM (rowwise scales)" : "cuBLASLt FP8 GEMM (tensorwise scales)", dout.host(),
                 want, 2e-3);
  }
  gemm_f8_backward(N, C, OC, x, w, sm);
}

/// The Float8 linears as a group on one input (cuda_kernels::f8_matmuls_forward / _backward:
/// the input's codes made once when the group's GEMMs all take one path) equal the same
/// linears one at a time, exactly -- each recipe; a width FP8 GEMMs cannot take (40) puts one
/// linear on the emulation's path, and the group then runs one by one.
void linear_groups(int sm) {
  const std::int64_t N = 64, C = 128;
  const auto x = randn(static_cast<std::size_t>(N * C), 60);
  for (const f8_recipe r : {f8_recipe::tensorwise, f8_recipe::rowwise}) {
    if (r == f8_recipe::rowwise && sm < 90) continue;  // outer-vector scales (reported above)
    const cpu::f8_linear_casts c = cpu::f8_linear_casts_of(r);
    for (const std::int64_t odd : {32, 40}) {
      const std::int64_t ocs[] = {96, odd, 32};
      std::vector<dvec> w, dy, group_out, one_out, group_dw, one_dw;
      std::vector<linear_out> outs;
      std::vector<linear_grad> grads;
      for (std::size_t i = 0; i < 3; ++i) {
        const auto n_out = static_cast<std::size_t>(N * ocs[i]), n_w = static_cast<std::size_t>(ocs[i] * C);
        w.emplace_back(randn(n_w, 61 + static_cast<unsigned>(i), 0.1f));
        dy.emplace_back(randn(n_out, 64 + static_cast<unsigned>(i), 0.5f));
        group_out.emplace_back(std::vector<float>(n_out)), one_out.emplace_back(std::vector<float>(n_out));
        group_dw.emplace_back(std::vector<float>(n_w, 0.25f)), one_dw.emplace_back(std::vector<float>(n_w, 0.25f));
      }
      for (std::size_t i = 0; i < 3; ++i)
        outs.push_back({group_out[i].get(), w[i].get(), ocs[i]}),
            grads.push_back({group_dw[i].get(), dy[i].get(), w[i].get(), ocs[i]});
      dvec dx(x), a{std::vector<float>(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, C, 96)))},
          b{std::vector<float>(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, C, 96)))},
          group_din{std::vector<float>(static_cast<std::size_t>(N * C), 0.25f)},
          one_din{std::vector<float>(static_cast<std::size_t>(N * C), 0.25f)};
      cuda_kernels::f8_matmuls_forward(dx.get(), N, C, outs, c, a.get(), b.get(), cpu::f8_split::none,
                                       cpu::f8_local_amax{});
#ifdef TESSERA_CUDA_EMULATION
      const std::int64_t dual_before = cuda::emulation::launches("f8_dual_codes_k");
#endif
      cuda_kernels::f8_matmuls_backward(group_din.get(), dx.get(), N, C, grads, c, a.get(), b.get(),
                                        cpu::f8_split::none, cpu::f8_local_amax{});
#ifdef TESSERA_CUDA_EMULATION
      {  // each output gradient's two casts in one f8_codes_both where every GEMM is rowwise FP8
        const std::int64_t n = cuda::emulation::launches("f8_dual_codes_k") - dual_before,
                           want = r == f8_recipe::rowwise && odd == 32 ? 3 : 0;
        std::printf("Float8 group: f8_codes_both calls %lld (want %lld) %s\n", static_cast<long long>(n),
                    static_cast<long long>(want), n == want ? "PASS" : "FAIL");
        failures += n == want ? 0 : 1;
      }
#endif
      for (std::size_t i = 0; i < 3; ++i) {
        const linear_out o{one_out[i].get(), w[i].get(), ocs[i]};
        const linear_grad g{one_dw[i].get(), dy[i].get(), w[i].get(), ocs[i]};
        cuda_kernels::f8_matmuls_forward(dx.get(), N, C, {&o, 1}, c, a.get(), b.get(), cpu::f8_split::none,
                                         cpu::f8_local_amax{});
        cuda_kernels::f8_matmuls_backward(one_din.get(), dx.get(), N, C, {&g, 1}, c, a.get(), b.get(),
                                          cpu::f8_split::none, cpu::f8_local_amax{});
      }
      const std::string name = std::string(" (") + (r == f8_recipe::rowwise ? "rowwise" : "tensorwise") +
                               (odd == 40 ? ", one by one)" : ")");
      for (std::size_t i = 0; i < 3; ++i) {
        expect_close(("Float8 group: out " + std::to_string(i) + name).c_str(), group_out[i].host(),
                     one_out[i].host(), 0);
        expect_close(("Float8 group: dw " + std::to_string(i) + name).c_str(), group_dw[i].host(), one_dw[i].host(),
                     0);
      }
      expect_close(("Float8 group: dinp" + name).c_str(), group_din.host(), one_din.host(), 0);
      // and the backward against the CPU's emulation of the same casts (the FP8 GEMMs' sums in
      // another order: gemm_f8's tolerance); rowwise with every GEMM on FP8 runs f8_codes_both
      std::vector<std::vector<float>> hw, hdy, want_dw;
      std::vector<linear_grad> host_grads;
      for (std::size_t i = 0; i < 3; ++i)
        hw.push_back(w[i].host()), hdy.push_back(dy[i].host()),
            want_dw.emplace_back(static_cast<std::size_t>(ocs[i] * C), 0.25f);
      for (std::size_t i = 0; i < 3; ++i)
        host_grads.push_back({want_dw[i].data(), hdy[i].data(), hw[i].data(), ocs[i]});
      std::vector<float> want_din(static_cast<std::size_t>(N * C), 0.25f),
          ha(static_cast<std::size_t>(cpu::f8_linear_buffer_a(N, C, 96))),
          hb(static_cast<std::size_t>(cpu::f8_linear_buffer_b(N, C, 96)));
      cpu::f8_matmuls_backward(want_din.data(), x.data(), N, C, host_grads, c, ha.data(), hb.data());
      for (std::size_t i = 0; i < 3; ++i)
        expect_close(("Float8 group: dw " + std::to_string(i) + " against the CPU" + name).c_str(),
                     group_dw[i].host(), want_dw[i], 2e-3);
      expect_close(("Float8 group: dinp against the CPU" + name).c_str(), group_din.host(), want_din, 2e-3);
    }
  }
}

/// FSDP's FP8 all-gather on a device backend (parallel/fsdp.hpp): the block's amax, its
/// tensorwise e4m3 codes and their values through cuda_kernels equal cpu_kernels' exactly.
void backend_fp8_gather() {
  const auto x = randn(40003, 42, 2.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  const cpu::f8_cast c{};
  float amax = 0;
  cpu_kernels::abs_max(&amax, x.data(), n);
  const float scale = cpu::f8_scale_from_amax(amax, c.target, c.rounding);
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> back(x.size());
  cpu_kernels::f8_quantize(codes.data(), x.data(), &scale, n, c);
  cpu_kernels::f8_dequantize(back.data(), codes.data(), &scale, n, c);
  dvec dx(x), damax{std::vector<float>(1)}, dscale{std::vector<float>{scale}}, dback{std::vector<float>(x.size())};
  dbytes dcodes(codes.size());
  cuda_kernels::abs_max(damax.get(), dx.get(), n);
  cuda_kernels::f8_quantize(dcodes.get(), dx.get(), dscale.get(), n, c);
  cuda_kernels::f8_dequantize(dback.get(), dcodes.get(), dscale.get(), n, c);
  std::vector<std::uint8_t> got(codes.size());
  copy_to_host(got.data(), dcodes.get(), got.size());
  expect_close("FP8 all-gather casts: amax", damax.host(), {amax}, 0);
  expect_close("FP8 all-gather casts: codes", std::vector<float>(got.begin(), got.end()),
               std::vector<float>(codes.begin(), codes.end()), 0);
  expect_close("FP8 all-gather casts: values", dback.host(), back, 0);
}
}  // namespace

int main() {
  if (no_cuda_device()) return 77;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  try {
    float8();
    float8_both();
    backend_fp8_gather();
    gemm_f8(prop.major * 10 + prop.minor);
    linear_groups(prop.major * 10 + prop.minor);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "FAILED: %d check(s)\n" : "PASSED\n", failures);
  return failures ? 1 : 0;
}
