"""The attribute space of the synthetic background clips, and how a clip's attributes are drawn.

Every clip shows one scene at one time of day in one weather, and one object crossing it in
one direction at one speed. Objects only appear where they belong (boats on the sea, cars in
the city), and ground objects only move sideways, so the captions stay plausible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

SCENES = ("sky", "sea", "city", "forest", "mountain")
TIMES = ("day", "sunset", "night")
WEATHERS = ("clear", "rain", "snow")
DIRECTIONS = ("left", "right", "up", "down")
SPEEDS = ("slow", "fast")

# object -> (scenes it appears in, directions it can move in)
OBJECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cloud": (("sky", "sea", "city", "forest", "mountain"), ("left", "right")),
    "bird": (("sky", "sea", "forest", "mountain"), DIRECTIONS),
    "airplane": (("sky", "city", "sea", "mountain"), DIRECTIONS),
    "balloon": (("sky", "forest", "mountain", "city"), DIRECTIONS),
    "car": (("city",), ("left", "right")),
    "boat": (("sea",), ("left", "right")),
}


@dataclass(frozen=True)
class ClipAttributes:
    scene: str
    time: str
    weather: str
    object: str
    direction: str
    speed: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def reversed(self) -> "ClipAttributes":
        """What a viewer of the frames played backwards would see."""
        opposite = {"left": "right", "right": "left", "up": "down", "down": "up"}
        return ClipAttributes(**{**self.as_dict(), "direction": opposite[self.direction]})


def draw_attributes(rng: np.random.Generator) -> ClipAttributes:
    """Uniform over scene, time, weather, speed; object uniform among those fitting the scene."""
    scene = SCENES[rng.integers(len(SCENES))]
    objects = [name for name, (scenes, _) in OBJECTS.items() if scene in scenes]
    obj = objects[rng.integers(len(objects))]
    directions = OBJECTS[obj][1]
    return ClipAttributes(
        scene=scene,
        time=TIMES[rng.integers(len(TIMES))],
        weather=WEATHERS[rng.integers(len(WEATHERS))],
        object=obj,
        direction=directions[rng.integers(len(directions))],
        speed=SPEEDS[rng.integers(len(SPEEDS))],
    )
