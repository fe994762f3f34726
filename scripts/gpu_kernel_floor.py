"""The fixed time of one link of a compiled JAX program: a chain of N dependent tiny matmuls
each followed by a tanh (8x8 data: no arithmetic worth the name, so the chain's time is N links
of one or two kernels each, their launches and minimum run times), jitted, timed after
compilation; and a large TF32 matmul's rate, for scale. Prints two lines. Needs JAX with a GPU (the device machine's image has it).

  python3 scripts/gpu_kernel_floor.py
"""

import time

import jax
import jax.numpy as jnp

CHAIN = 400


@jax.jit
def chain(x, w):
  for _ in range(CHAIN):
    x = jnp.tanh(x @ w)  # the tanh keeps XLA from merging the matmuls
  return x


def best(fn, *args, repeats=20):
  fn(*args).block_until_ready()
  times = []
  for _ in range(repeats):
    began = time.perf_counter()
    fn(*args).block_until_ready()
    times.append(time.perf_counter() - began)
  return min(times)


def main():
  x = jnp.ones((8, 8), jnp.float32)
  seconds = best(chain, x, x)
  print('device %s: %.2f us per link (chain of %d tiny matmul+tanh, jitted; best of 20)'
        % (jax.devices()[0].device_kind, 1e6 * seconds / CHAIN, CHAIN))
  n = 8192
  a = jnp.ones((n, n), jnp.float32)
  matmul = jax.jit(lambda a: a @ a)
  seconds = best(matmul, a, repeats=10)
  print('fp32 matmul %dx%d (JAX default precision): %.0f TFLOP/s'
        % (n, n, 2 * n ** 3 / seconds / 1e12))


if __name__ == '__main__':
  main()
