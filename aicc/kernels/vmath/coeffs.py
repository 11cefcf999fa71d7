"""Polynomial coefficients of the float32 math functions, shared by the SIMD forms (exp.py,
erf.py, log.py, expm1.py) and the portable ones (portable.py, act.py), so that both compute
the same approximations.
"""
from __future__ import annotations


# float32 erf: piecewise polynomials in |x| (Chebyshev fits, power basis; max abs error about
# 1 ulp of 1.0 = 6e-8 over the float range, relative 2e-7 below 0.875): branch-free selects of
# plain arithmetic, so element loops vectorize (libm's erff is a call per element).
ERF_SMALL = (1.1283791065216064, -0.3761257529258728, 0.11282739043235779,   # erf(x)/x in x^2
             -0.026802752166986465, 0.005050345323979855, -0.0006304804119281471)
ERF_MID = (0.027125392109155655, -0.09821223467588425, 0.1534559577703476,   # erfc, |x| - 1.5625
           -0.12711523473262787, 0.0481678731739521, 0.008060291409492493,
           -0.017108064144849777, 0.0055750212632119656, 0.0016453054267913103,
           -0.0013598061632364988)
ERF_BIG = (9.892089110508095e-06, -6.473914254456758e-05, 0.00020266791398171335,  # |x| - 3.125
           -0.0004005294176749885, 0.0005545718595385551, -0.0005732449935749173,
           0.0004626628942787647, -0.000277511979220435, 9.775819489732385e-05,
           -1.1247573638684116e-05)


def horner(u, coefs, L):
    """C text of coefs[0] + u * (coefs[1] + ...) with separate multiplies and adds (no FMA);
    L spells a coefficient as a C literal."""
    e = L(coefs[-1])
    for c in coefs[-2::-1]:
        e = f"({L(c)} + {u} * {e})"
    return e


GELU_K = 0.7071067811865476          # 1 / sqrt(2): Gelu(x) = 0.5 x (1 + erf(x / sqrt(2)))
GELU_TANH_C = 0.7978845608028654    # sqrt(2 / pi): Gelu tanh(x) = 0.5 x (1 + tanh(c (x + 0.044715 x^3)))
EXP_C = (("l2e", 1.44269504088896341), ("c1", 0.693359375), ("c2", -2.12194440e-4),
         ("p0", 1.9875691500e-4), ("p1", 1.3981999507e-3), ("p2", 8.3334519073e-3),
         ("p3", 4.1665795894e-2), ("p4", 1.6666665459e-1), ("p5", 5.0000001201e-1))
TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
          -3.33332819422e-1)
LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
         1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
         3.3333331174e-1)
