"""A random stopper on EvalStop-v0: the smallest complete loop.

python examples/random_agent.py
"""

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers EvalStop-v0)

env = gym.make("EvalStop-v0", scheduler="srtf-est", eval_noise=0.02, render_mode="ansi")
# The agent's own random stream: drawing from env.np_random would change the episodes
# the env draws at its next reset.
rng = np.random.default_rng(0)
obs, info = env.reset(seed=0)
print(env.render())
total, done = 0.0, False
while not done:
    # Stop with probability 5 % at each checkpoint.
    action = int(rng.random() < 0.05)
    obs, reward, terminated, truncated, info = env.step(action)
    total += reward
    done = terminated or truncated
m = info["episode_metrics"]
print(f"return {total:.2f}  (closed form {m['return']:.2f})")
print(
    f"mean JCT {m['mean_jct_h']:.1f} h, waste {m['wasted_gpu_hours']:.0f} GPU-h, "
    f"precision {m['precision']:.2f}, recall {m['recall']:.2f}, FPR {m['fpr']:.2f}"
)
