"""Draw the frames of one synthetic background clip with numpy.

A clip is a static background (sky coloured by time of day and weather, ground shaped by the
scene, a static rain/snow layer) with one outlined object sliding across it. Object shapes are
left-right and up-down symmetric, so a single frame says nothing about the direction of motion:
direction and speed can only be read from several frames in order.
"""

from __future__ import annotations

import numpy as np

from video_io.synth.attributes import ClipAttributes

SKY = {  # (top, horizon) colours of a clear sky
    "day": ((105, 165, 230), (185, 218, 245)),
    "sunset": ((95, 70, 140), (250, 150, 75)),
    "night": ((6, 10, 32), (28, 38, 75)),
}
# Overcast skies: rain is dark blue-grey, snow pale grey, so weather shows in colour, not only
# in the rain/snow texture (which is faint at the model's 56x56).
OVERCAST = {
    "rain": {"day": (110, 120, 135), "sunset": (120, 95, 100), "night": (22, 26, 36)},
    "snow": {"day": (200, 205, 212), "sunset": (190, 165, 165), "night": (70, 72, 82)},
}
SHADE = {"day": 1.0, "sunset": 0.7, "night": 0.3}  # how lit the ground is
FAST_TRAVEL, SLOW_TRAVEL = (0.45, 0.55), (0.22, 0.28)  # fraction of the frame crossed per clip


def _rgb(c, shade: float = 1.0) -> np.ndarray:
    return np.clip(np.asarray(c, dtype=np.float32) * shade, 0, 255)


class _Canvas:
    """Float RGB image plus pixel-centre coordinate grids normalised to [0, 1]."""

    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        self.img = np.zeros((height, width, 3), np.float32)
        ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
        self.x, self.y = (xs + 0.5) / width, (ys + 0.5) / height

    def fill(self, mask: np.ndarray, colour, alpha: float = 1.0) -> None:
        m = mask[..., None].astype(np.float32) * alpha
        self.img = self.img * (1 - m) + _rgb(colour) * m

    def disk(self, cx, cy, r, aspect: float = 1.0) -> np.ndarray:
        # radius r in units of frame width; aspect corrects for non-square frames
        dx, dy = (self.x - cx) , (self.y - cy) * self.h / self.w * aspect
        return dx * dx + dy * dy <= r * r

    def rect(self, x0, y0, x1, y1) -> np.ndarray:
        return (self.x >= x0) & (self.x <= x1) & (self.y >= y0) & (self.y <= y1)


def _draw_sky(cv: _Canvas, a: ClipAttributes, rng: np.random.Generator) -> None:
    top, horizon = SKY[a.time]
    if a.weather != "clear":
        grey = _rgb(OVERCAST[a.weather][a.time])
        top, horizon = _rgb(top) * 0.25 + grey * 0.75, _rgb(horizon) * 0.25 + grey * 0.75
    t = cv.y[..., None]
    cv.img = _rgb(top) * (1 - t) + _rgb(horizon) * t
    if a.weather != "clear":
        return  # clouds hide the sun, the moon and the stars
    if a.time == "night":
        for _ in range(14):
            cv.fill(cv.disk(rng.uniform(0, 1), rng.uniform(0, 0.55), 0.008), (235, 235, 210))
        cv.fill(cv.disk(rng.uniform(0.1, 0.9), rng.uniform(0.08, 0.2), 0.05), (235, 232, 200))
    elif a.time == "sunset":
        cv.fill(cv.disk(rng.uniform(0.2, 0.8), 0.6, 0.09), (255, 190, 80))
    else:
        cv.fill(cv.disk(rng.uniform(0.1, 0.9), rng.uniform(0.06, 0.16), 0.055), (255, 240, 150))


def _draw_ground(cv: _Canvas, a: ClipAttributes, rng: np.random.Generator) -> None:
    s = SHADE[a.time]
    horizon = rng.uniform(0.6, 0.66)
    if a.scene == "sea":
        cv.fill(cv.y >= horizon, _rgb((30, 100, 170), s) if a.time != "sunset" else (95, 75, 125))
        for _ in range(6):  # static wave crests
            y0 = rng.uniform(horizon + 0.03, 0.97)
            x0 = rng.uniform(0, 0.8)
            cv.fill(cv.rect(x0, y0, x0 + rng.uniform(0.1, 0.25), y0 + 0.012), _rgb((170, 200, 230), s))
    elif a.scene == "city":
        road = 0.72
        x = 0.0
        while x < 1.0:
            width, height = rng.uniform(0.08, 0.16), rng.uniform(0.2, 0.45)
            cv.fill(cv.rect(x, road - height, x + width - 0.01, road), _rgb((95, 105, 125), max(s, 0.25)))
            for wx in np.arange(x + 0.015, x + width - 0.03, 0.035):
                for wy in np.arange(road - height + 0.02, road - 0.03, 0.05):
                    lit = a.time == "night" and rng.random() < 0.6
                    colour = (255, 215, 110) if lit else _rgb((165, 185, 205), s)
                    cv.fill(cv.rect(wx, wy, wx + 0.015, wy + 0.022), colour)
            x += width
        cv.fill(cv.y >= road, _rgb((70, 70, 78), max(s, 0.4)))
        for dx in np.arange(0.02, 1.0, 0.12):  # lane markings
            cv.fill(cv.rect(dx, 0.955, dx + 0.06, 0.965), _rgb((230, 230, 230), max(s, 0.5)))
    elif a.scene == "forest":
        cv.fill(cv.y >= horizon, _rgb((40, 110, 45), s))
        for tx in np.arange(-0.04, 1.04, 0.07):
            height = rng.uniform(0.12, 0.22)
            base = horizon + 0.02
            tri = (cv.y <= base) & (cv.y >= base - height) & (
                np.abs(cv.x - tx) <= 0.045 * (cv.y - (base - height)) / height)
            cv.fill(tri, _rgb((25, 85, 35), s))
    elif a.scene == "mountain":
        for _ in range(3):
            px, height = rng.uniform(0.1, 0.9), rng.uniform(0.25, 0.42)
            base = horizon + 0.05
            peak = base - height
            slope = np.abs(cv.x - px) * 1.2
            body = (cv.y >= peak + slope) & (cv.y <= base)
            cv.fill(body, _rgb((115, 105, 100), s))
            cv.fill(body & (cv.y <= peak + 0.07), _rgb((240, 240, 245), max(s, 0.45)))
        cv.fill(cv.y >= horizon + 0.05, _rgb((70, 105, 55), s))


def _draw_weather(cv: _Canvas, a: ClipAttributes, rng: np.random.Generator, ground: np.ndarray) -> None:
    # Static on purpose: moving particles would be a second, conflicting motion signal.
    if a.weather == "rain":
        cv.img = np.where(ground[..., None], cv.img * 0.8, cv.img)  # wet, darker ground
        for _ in range(40):
            x0, y0, length = rng.uniform(-0.05, 1), rng.uniform(-0.05, 1), rng.uniform(0.08, 0.12)
            along = (cv.y - y0) / length
            streak = (along >= 0) & (along <= 1) & (np.abs(cv.x - (x0 + 0.3 * (cv.y - y0))) <= 0.009)
            cv.fill(streak, (175, 190, 220), alpha=0.8)
    elif a.weather == "snow":
        cv.fill(ground, (235, 238, 245), alpha=0.55)  # snow cover
        for _ in range(45):
            cv.fill(cv.disk(rng.uniform(0, 1), rng.uniform(0, 1), 0.017), (252, 252, 255), alpha=0.95)


def _object_layers(name: str, cv: _Canvas, cx: float, cy: float, size: float, night: bool):
    """(mask, colour) layers of an object of width `size` centred at (cx, cy), drawn in order."""
    X, Y = cv.x - cx, (cv.y - cy) * cv.h / cv.w  # frame-width units, y grows downwards
    s = size
    if name == "cloud":
        body = np.zeros_like(X, bool)
        for ox, oy, r in ((-0.28, 0.05, 0.2), (0.0, -0.06, 0.26), (0.28, 0.05, 0.2), (0.0, 0.08, 0.22)):
            body |= (X - ox * s) ** 2 + (Y - oy * s) ** 2 <= (r * s) ** 2
        return [(body, (150, 150, 165) if night else (248, 248, 252))]
    if name == "bird":
        wing = np.abs(Y + 0.1 * s - 0.45 * np.abs(X)) <= 0.07 * s
        return [(wing & (np.abs(X) <= 0.5 * s), (20, 20, 28)),
                ((X / (0.11 * s)) ** 2 + (Y / (0.09 * s)) ** 2 <= 1, (20, 20, 28))]
    if name == "airplane":
        fuselage = (X / (0.5 * s)) ** 2 + (Y / (0.1 * s)) ** 2 <= 1
        wings = (np.abs(X) <= 0.09 * s) & (np.abs(Y) <= 0.42 * s)
        tails = (np.abs(np.abs(X) - 0.42 * s) <= 0.04 * s) & (np.abs(Y) <= 0.16 * s)
        return [(fuselage | wings | tails, (205, 210, 222)), (fuselage & (np.abs(Y) <= 0.025 * s), (40, 80, 200))]
    if name == "balloon":
        envelope = X ** 2 + (Y + 0.12 * s) ** 2 <= (0.36 * s) ** 2
        stripe = envelope & (np.abs(X) <= 0.09 * s)
        basket = (np.abs(X) <= 0.1 * s) & (Y >= 0.32 * s) & (Y <= 0.46 * s)
        ropes = (np.abs(np.abs(X) - 0.08 * s) <= 0.015 * s) & (Y >= 0.2 * s) & (Y <= 0.32 * s)
        return [(envelope, (215, 40, 120)), (stripe, (250, 215, 40)), (basket | ropes, (120, 75, 35))]
    if name == "car":
        body = (np.abs(X) <= 0.5 * s) & (np.abs(Y) <= 0.12 * s)
        cabin = (np.abs(X) <= 0.26 * s) & (Y >= -0.3 * s) & (Y <= -0.1 * s)
        window = (np.abs(X) <= 0.2 * s) & (Y >= -0.26 * s) & (Y <= -0.14 * s)
        wheels = ((np.abs(X) - 0.3 * s) ** 2 + (Y - 0.13 * s) ** 2) <= (0.11 * s) ** 2
        return [(body | cabin, (215, 35, 35)), (window, (170, 215, 240)), (wheels, (15, 15, 15))]
    if name == "boat":
        hull = (Y >= 0.05 * s) & (Y <= 0.25 * s) & (np.abs(X) <= 0.5 * s - (Y - 0.05 * s) * 0.9)
        mast = (np.abs(X) <= 0.02 * s) & (Y >= -0.5 * s) & (Y <= 0.05 * s)
        sail = (Y >= -0.45 * s) & (Y <= 0.0) & (np.abs(X) <= (Y + 0.45 * s) * 0.55)
        return [(hull, (125, 72, 32)), (sail, (250, 250, 245)), (mast, (60, 40, 20))]
    raise ValueError(f"unknown object {name!r}")


def _dilate(mask: np.ndarray, k: int) -> np.ndarray:
    out = mask.copy()
    for dy in range(-k, k + 1):
        for dx in range(-k, k + 1):
            if dx * dx + dy * dy <= k * k:
                out |= np.roll(np.roll(mask, dy, 0), dx, 1)
    return out


def object_track(a: ClipAttributes, rng: np.random.Generator, n_frames: int):
    """Object centre per frame (normalised coordinates) for the clip's direction and speed."""
    travel = rng.uniform(*(FAST_TRAVEL if a.speed == "fast" else SLOW_TRAVEL))
    if a.object == "car":
        lane = rng.uniform(0.82, 0.88)
    elif a.object == "boat":
        lane = rng.uniform(0.72, 0.78)
    elif a.scene == "sky":
        lane = rng.uniform(0.3, 0.7)
    else:
        lane = rng.uniform(0.22, 0.4)
    t = np.linspace(-0.5, 0.5, n_frames) * travel
    centre = 0.5 + rng.uniform(-0.08, 0.08)
    sign = 1.0 if a.direction in ("right", "down") else -1.0
    along = centre + sign * t
    if a.direction in ("left", "right"):
        return along, np.full(n_frames, lane)
    return np.full(n_frames, rng.uniform(0.3, 0.7)), along


def render_background(a: ClipAttributes, rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """The clip's static scene (sky, ground, weather) as a float32 (H, W, 3) RGB image."""
    cv = _Canvas(width, height)
    _draw_sky(cv, a, rng)
    sky = cv.img.copy()
    if a.scene != "sky":
        _draw_ground(cv, a, rng)
    ground = np.abs(cv.img - sky).sum(-1) > 1  # whatever the scene drew over the sky
    _draw_weather(cv, a, rng, ground)
    return cv.img


def render_object(a: ClipAttributes, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The clip's object, outlined as in render_clip, on a square `width` px sprite: (RGB float32
    (w, w, 3), alpha bool (w, w)). The object spans 80% of the sprite's width."""
    cv = _Canvas(width, width)
    layers = _object_layers(a.object, cv, 0.5, 0.5, 0.8, a.time == "night")
    outline = (235, 235, 235) if a.object == "bird" or a.time == "night" else (25, 25, 30)
    silhouette = _dilate(np.logical_or.reduce([m for m, _ in layers]), max(1, round(0.05 * width)))
    cv.fill(silhouette, outline)
    for mask, colour in layers:
        cv.fill(mask, colour)
    return cv.img, silhouette


def render_clip(a: ClipAttributes, rng: np.random.Generator, n_frames: int,
                width: int, height: int) -> np.ndarray:
    """Frames of one clip as a (T, H, W, 3) uint8 array."""
    background = render_background(a, rng, width, height)
    cv = _Canvas(width, height)

    size = rng.uniform(0.28, 0.34)
    xs, ys = object_track(a, rng, n_frames)
    outline = (235, 235, 235) if a.object == "bird" or a.time == "night" else (25, 25, 30)
    border = max(1, round(0.018 * width))
    frames = np.empty((n_frames, height, width, 3), np.uint8)
    for i in range(n_frames):
        cv.img = background.copy()
        layers = _object_layers(a.object, cv, xs[i], ys[i], size, a.time == "night")
        silhouette = np.logical_or.reduce([m for m, _ in layers])
        cv.fill(_dilate(silhouette, border), outline)
        for mask, colour in layers:
            cv.fill(mask, colour)
        frames[i] = np.clip(cv.img + 0.5, 0, 255).astype(np.uint8)
    return frames
