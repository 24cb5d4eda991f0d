// y[i, j] = x[i, j] * scale[j] + shift[j] for a row-major float32 matrix; one element per thread.
extern "C" __global__ void scale_shift(const float* __restrict__ x, const float* __restrict__ scale,
                                       const float* __restrict__ shift, float* __restrict__ y,
                                       long long n, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = (int)(i % cols);
        y[i] = x[i] * scale[j] + shift[j];
    }
}
