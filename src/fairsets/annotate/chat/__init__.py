"""What the vote and the captions share to talk to chat-model annotators.

Reads the kept boxes of stage 1 (``ANN/boxes/{shard}.parquet``) and the shards' images, and an
annotators file (:mod:`.annotators`, ``annotators.toml``); writes the answer cache
``ANN/.fairsets/chat-cache`` (:func:`.requests.chat_cache_dir`) and its index of rendered views
(``chat-cache/views``). :mod:`.items` chooses the boxes (kept boxes, seeded samples) and renders
each as the JPEG a model is shown (:mod:`.views`: the crop or the red box); :mod:`.requests`
builds the requests more than one command sends.

Importing this package imports none of its modules: each name below is imported on first use.
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "CAPTION_MAX_TOKENS",
    "CAPTION_VIEW",
    "DEFAULT_CAPTION_PROMPT",
    "RED",
    "RENDER_VERSION",
    "VIEWS",
    "VOTE_VIEW",
    "Annotators",
    "BoxItem",
    "caption_request",
    "chat_cache_dir",
    "crop_view",
    "data_url",
    "encode_jpeg",
    "fit",
    "image_part",
    "keep_view",
    "kept_boxes",
    "kept_view",
    "line_width",
    "load_annotators",
    "load_voters",
    "redbox",
    "remember_view",
    "render",
    "sample",
    "shard_refs",
    "source_sha256",
    "usable_caption",
    "view_digest",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Annotators": "fairsets.annotate.chat.annotators",
        "BoxItem": "fairsets.annotate.chat.items",
        "CAPTION_MAX_TOKENS": "fairsets.annotate.chat.requests",
        "CAPTION_VIEW": "fairsets.annotate.chat.requests",
        "DEFAULT_CAPTION_PROMPT": "fairsets.annotate.chat.views",
        "RED": "fairsets.annotate.chat.views",
        "RENDER_VERSION": "fairsets.annotate.chat.items",
        "VIEWS": "fairsets.annotate.chat.views",
        "VOTE_VIEW": "fairsets.annotate.chat.requests",
        "caption_request": "fairsets.annotate.chat.requests",
        "chat_cache_dir": "fairsets.annotate.chat.requests",
        "crop_view": "fairsets.annotate.chat.views",
        "data_url": "fairsets.annotate.chat.views",
        "encode_jpeg": "fairsets.annotate.chat.views",
        "fit": "fairsets.annotate.chat.views",
        "image_part": "fairsets.annotate.chat.views",
        "keep_view": "fairsets.annotate.chat.items",
        "kept_boxes": "fairsets.annotate.chat.items",
        "kept_view": "fairsets.annotate.chat.items",
        "line_width": "fairsets.annotate.chat.views",
        "load_annotators": "fairsets.annotate.chat.annotators",
        "load_voters": "fairsets.annotate.chat.annotators",
        "redbox": "fairsets.annotate.chat.views",
        "remember_view": "fairsets.annotate.chat.items",
        "render": "fairsets.annotate.chat.views",
        "sample": "fairsets.annotate.chat.items",
        "shard_refs": "fairsets.annotate.chat.items",
        "source_sha256": "fairsets.annotate.chat.items",
        "usable_caption": "fairsets.annotate.chat.requests",
        "view_digest": "fairsets.annotate.chat.items",
    },
)
