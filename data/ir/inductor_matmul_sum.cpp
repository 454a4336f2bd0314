// cpp_fused_mul_sum_unsqueeze_0: Inductor's C++ for (a[:, :, None] * b[None, :, :]).sum(1), a 64x48, b 48x40
// recorded with torch 2.13.0+cpu on an AVX512 CPU (course_lib.ir.schedule reads its loops)
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(40L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        float tmp_acc0 = 0;
                        at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                        for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(48L); x2+=static_cast<int64_t>(1L))
                        {
                            {
                                if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                                {
                                    auto tmp0 = in_ptr0[static_cast<int64_t>(x2 + 48L*x0)];
                                    auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 40L*x2), static_cast<int64_t>(16));
                                    auto tmp2 = at::vec::Vectorized<float>(tmp0);
                                    auto tmp3 = tmp2 * tmp1;
                                    tmp_acc0_vec = tmp_acc0_vec + tmp3;
                                }
                                if(C10_UNLIKELY(x1 >= static_cast<int64_t>(32L) && x1 < static_cast<int64_t>(40L)))
                                {
                                    auto tmp0 = in_ptr0[static_cast<int64_t>(x2 + 48L*x0)];
                                    auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 40L*x2), static_cast<int64_t>(8L));
                                    auto tmp2 = at::vec::Vectorized<float>(tmp0);
                                    auto tmp3 = tmp2 * tmp1;
                                    tmp_acc0_vec = sum_masked_reduce(tmp_acc0_vec, tmp3, static_cast<int64_t>(8L));
                                }
                            }
                        }
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x1 + 40L*x0));
                        }
                        if(C10_UNLIKELY(x1 >= static_cast<int64_t>(32L) && x1 < static_cast<int64_t>(40L)))
                        {
                            tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x1 + 40L*x0), static_cast<int64_t>(8L));
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}