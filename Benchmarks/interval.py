"""A ratio of two commands' median times with its bootstrap 95 % interval: where the ratio of the
medians could come out in another run of as many rounds. The commands ran in the same short rounds
(the machine's speed drifts between them, and runs within one round are alike), so whole rounds are
drawn again, with replacement, the same rounds for both commands, 1,000 times; the runs of a
command that ran in one round only are drawn one by one. A fixed seed: the same runs give the same
report. Used by report.py (RESULTS.md) and wayland.sh (WAYLAND.md).

Each command's runs are given as a list of rounds, each a list of times."""
import random
import statistics


def _ratio(a, b):
    return statistics.median(a) / statistics.median(b)


def ratio_interval(a_rounds, b_rounds, resamples=1000, seed=0):
    rng = random.Random(seed)
    rounds = min(len(a_rounds), len(b_rounds))
    ratios = []
    for _ in range(resamples):
        if rounds > 1:
            picked = [rng.randrange(rounds) for _ in range(rounds)]
            a = [t for i in picked for t in a_rounds[i]]
            b = [t for i in picked for t in b_rounds[i]]
        else:
            flat_a, flat_b = [t for r in a_rounds for t in r], [t for r in b_rounds for t in r]
            a, b = rng.choices(flat_a, k=len(flat_a)), rng.choices(flat_b, k=len(flat_b))
        ratios.append(_ratio(a, b))
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def interval_words(a_rounds, b_rounds):
    """The interval as a report writes it."""
    low, high = ratio_interval(a_rounds, b_rounds)
    return f"95 % interval {low:.2f}–{high:.2f}"


def verdict(ratio, target, a_rounds=None, b_rounds=None):
    """Met or not on the ratio of the medians; when the runs are given, also whether the target
    lies inside the interval (the run cannot tell that row from its target)."""
    words = "met" if ratio <= target else "**not met**"
    if a_rounds is not None and b_rounds is not None:
        low, high = ratio_interval(a_rounds, b_rounds)
        if low <= target <= high:
            words += f" (the interval holds {target})"
    return words
