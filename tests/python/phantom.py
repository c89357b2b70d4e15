"""An analytic phantom (discs, whose Radon transform is exact) and an
independent numpy filtered back-projection written from PROTOCOL.md 3.10,
to check rtomod's slices against."""
import numpy as np

# centre (x, y) and radius as fractions of the detector width, attenuation
# per pixel; overlapping discs add up.
DISCS = [
    (0.00, 0.00, 0.40, 0.010),
    (-0.15, 0.10, 0.12, 0.010),
    (0.18, -0.05, 0.08, 0.020),
]


def sinogram(width, angles_deg, axis=None):
    """Exact line integrals of the phantom: (n_angles, width) float64.
    Pixel (x, y) projects to bin axis + (x-c) cos a - (y-c) sin a
    (PROTOCOL.md 3.3)."""
    axis = (width - 1) / 2.0 if axis is None else axis
    s = np.arange(width) - axis
    out = np.zeros((len(angles_deg), width))
    for k, deg in enumerate(angles_deg):
        a = np.deg2rad(deg)
        for fx, fy, fr, mu in DISCS:
            x0, y0, r = fx * width, fy * width, fr * width
            s0 = x0 * np.cos(a) - y0 * np.sin(a)
            out[k] += 2.0 * mu * np.sqrt(np.clip(r * r - (s - s0) ** 2, 0,
                                                 None))
    return out


def truth(size):
    c = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size] - c
    img = np.zeros((size, size))
    for fx, fy, fr, mu in DISCS:
        img[(x - fx * size) ** 2 + (y - fy * size) ** 2 < (fr * size) ** 2] \
            += mu
    return img


def interior(size, margin=2.5):
    """Pixels at least ``margin`` pixels from every disc edge."""
    c = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size] - c
    ok = np.ones((size, size), bool)
    for fx, fy, fr, _ in DISCS:
        d = np.hypot(x - fx * size, y - fy * size)
        ok &= np.abs(d - fr * size) > margin
    return ok


def fbp(sino, angles_deg, size=None, axis=None):
    """PROTOCOL.md 3.10 in double precision: Kak-Slaney ramp (ram-lak,
    cutoff 1) over rows zero-padded to the power of two >= 2W, weight
    pi / n_proj (uniform angles), linear interpolation, bins outside
    [0, W) count 0."""
    n_proj, width = sino.shape
    size = width if size is None else size
    axis = (width - 1) / 2.0 if axis is None else axis
    n = 1
    while n < 2 * width:
        n *= 2
    h = np.zeros(n)
    h[0] = 0.25
    k = np.arange(1, n // 2 + 1, 2)
    h[k] = -1.0 / (np.pi * k) ** 2
    h[n - k] = h[k]
    ramp = np.real(np.fft.fft(h))
    padded = np.zeros((n_proj, n))
    padded[:, :width] = sino
    q = np.real(np.fft.ifft(np.fft.fft(padded, axis=1) * ramp, axis=1))
    q = q[:, :width] * (np.pi / n_proj)
    qz = np.zeros((n_proj, width + 2))          # q(-1) = q(W) = 0
    qz[:, 1:width + 1] = q
    c = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size] - c
    img = np.zeros((size, size))
    for p, deg in enumerate(angles_deg):
        a = np.deg2rad(deg)
        s = axis + x * np.cos(a) - y * np.sin(a)
        i = np.floor(s)
        f = s - i
        i = i.astype(int)
        lo = np.clip(i, -1, width) + 1
        hi = np.clip(i + 1, -1, width) + 1
        img += (1 - f) * qz[p, lo] + f * qz[p, hi]
    return img
