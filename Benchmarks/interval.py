"""A ratio of two commands' median times with its bootstrap 95 % interval: where the ratio of the
medians could come out in another run of as many samples (each command's runs drawn again, with
replacement, 1,000 times; a fixed seed, so that a report comes out the same from the same runs).
Used by report.py (RESULTS.md) and wayland.sh (WAYLAND.md)."""
import random
import statistics


def ratio_interval(a, b, resamples=1000, seed=0):
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                    for _ in range(resamples))
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def interval_words(a, b):
    """The interval as a report writes it."""
    low, high = ratio_interval(a, b)
    return f"95 % interval {low:.2f}–{high:.2f}"


def verdict(ratio, target, a=None, b=None):
    """Met or not on the ratio of the medians; when the runs are given, also whether the target
    lies inside the interval (the run cannot tell that row from its target)."""
    words = "met" if ratio <= target else "**not met**"
    if a is not None and b is not None:
        low, high = ratio_interval(a, b)
        if low <= target <= high:
            words += f" (the interval holds {target})"
    return words
