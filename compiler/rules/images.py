"""SC312, SC318, SC319: the image and the SGLang build the profile is checked against belong together.

The catalog a profile is checked against is the build inside its image: spec/catalogs/image-builds.json (the
operator's table, digest -> catalog) says which build a digest holds, and engine.image_build, in the profile, says it
for a digest the table does not list. A tag names no build for good, so a tag-only image is checked against
engine.catalog on trust, and the finding says which build was assumed.
"""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.spec.catalog import IMAGE_BUILDS, image_builds

TABLE = f"spec/catalogs/{IMAGE_BUILDS}"


def repository(image: str) -> str:
    """The image's repository: without its tag and digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def listed(image: str) -> str:
    """The table's key for a digest-pinned image: repository@sha256:<digest>."""
    return f"{repository(image)}@{image.split('@', 1)[1]}"


@rule("SC312", "warning", "image pinned by tag only",
      "A tag can be moved to another build at any time, so the SGLang the catalog describes (and the checks ran "
      "against) may not be the one that starts. A digest names one build for good; the finding says which build "
      "the checks assumed.",
      "engine: {image: 'lmsysorg/sglang:dev-dsv41'}",
      "engine: {image: 'lmsysorg/sglang:dev-dsv41@sha256:<the 64 hex digits of the build>'}")
def image_pinned(ctx: Context) -> Iterator[Hit]:
    image = ctx.profile.engine.image
    if "@" not in image and ctx.profile.kubernetes is None:  # with the Kubernetes target SC505 says it
        yield Hit(("engine", "image"), f"{image} is pinned by tag only; the tag can move to another build "
                  f"(checked as {ctx.profile.engine.catalog}, engine.catalog)",
                  "append the digest the image has now: <image>@sha256:<64 hex digits> (`docker buildx imagetools "
                  "inspect <image>` prints it), and keep engine.catalog naming the SGLang build it holds")


@rule("SC318", "error", "the image holds another build than the catalog",
      f"{TABLE} (or engine.image_build, for a digest it does not list) says the image holds another SGLang "
      "build than engine.catalog selects: every engine check would judge flags and values against the wrong build.",
      "engine: {image: 'lmsysorg/sglang@sha256:<a 0.5.10 build>', catalog: sglang-0.5.23}",
      "engine: {image: 'lmsysorg/sglang@sha256:<a 0.5.10 build>', catalog: sglang-0.5.10.post1}")
def image_build(ctx: Context) -> Iterator[Hit]:
    image, catalog, said = ctx.profile.engine.image, ctx.profile.engine.catalog, ctx.profile.engine.image_build
    build = image_builds().get(listed(image)) if "@" in image else None
    at = ("engine", "catalog") if ctx.present(("engine", "catalog")) else ("engine", "image")
    if build is not None and build != catalog:
        yield Hit(at, f"{TABLE} lists {listed(image)} as {build}, but engine.catalog selects {catalog}",
                  f"set engine.catalog: {build}")
    elif build is None and said is not None and said != catalog:
        yield Hit(("engine", "image_build"), f"engine.image_build says {image} holds {said}, but engine.catalog "
                  f"selects {catalog}", f"set engine.catalog: {said}")


@rule("SC319", "warning", "a digest the image table does not know",
      f"{TABLE} lists builds of the image's repository, but not this digest: the checks assume it holds "
      "engine.catalog's build. engine.image_build says which build it holds, once checked on the image.",
      "engine: {image: 'lmsysorg/sglang@sha256:<a digest not in the table>'}",
      "engine: {image: 'lmsysorg/sglang@sha256:<a digest not in the table>', image_build: sglang-0.5.23}")
def image_unknown(ctx: Context) -> Iterator[Hit]:
    image = ctx.profile.engine.image
    if "@" not in image:
        return
    table = image_builds()
    known = [key for key in table if key.split("@", 1)[0] == repository(image)]
    if known and listed(image) not in table and ctx.profile.engine.image_build is None:
        # The table is package data a pip user cannot edit: the profile says which build its image holds.
        catalog = ctx.profile.engine.catalog
        yield Hit(("engine", "image"), f"{TABLE} lists {len(known)} build(s) of {repository(image)} but "
                  f"not this digest; checked as {catalog} (engine.catalog)",
                  f"set engine.image_build: {catalog} once the image is seen to hold it (docker run --rm <image> "
                  "python3 -c 'import sglang; print(sglang.__version__)'), or pin a digest the table lists")
