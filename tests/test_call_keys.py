"""Pinned call-cache keys and judge prompts (of the earlier built-in template, `builtin-v1`, which runs
started with it keep): the values every existing store's call cache was written with (computed by the
code of issue #22 and again before `request_key` became one `json.dumps`, issue #29). A change here
means every user's cached calls stop hitting."""

from __future__ import annotations

import hashlib

import pytest

from healthbench.executors.grading import EngineOptions, Grading, WorkItem, sample_request
from healthbench.grading.template import builtin_v1_template as builtin_template
from healthbench.models.base import ModelSettings, parse_model_spec, request_key

# JSON escapes, non-BMP characters, a line separator, a control character and both placeholders
ODD = 'Sé "breve"\\ ✓ 中文 🩺\n\ttab \u2028 <<rubric_item>> </script> \x01'
W = WorkItem(
    "c-1",
    0,
    (
        {"role": "system", "content": "You are a doctor."},
        {"role": "user", "content": "I have a headache."},
        {"role": "assistant", "content": ODD},
        {"role": "user", "content": "And now?"},
    ),
    ("[5] Advises rest.", '[-3] Says <<conversation>> "ok" ✓'),
)
W2 = WorkItem("c-2", 2, ({"role": "user", "content": "hi"},), ("[1] Greets.",))
SPECS = {
    "judge": parse_model_spec("bench-judge", "http://127.0.0.1:8000/v1"),
    "anthropic": parse_model_spec("anthropic/claude-sonnet-4"),
}
SETTINGS = {
    "plain": ModelSettings(),
    "rich": ModelSettings(
        temperature=0.1,
        max_tokens=2048,
        system_message="Sé breve ✓",
        reasoning_effort="low",
        extra_body={"seed": 7, "top_p": 0.95, "nested": {"b": [1, 2.5, None, True], "a": "x"}},
    ),
}
OPTIONS = {
    "plain": EngineOptions(),
    "struct": EngineOptions(structured_judge=True, judge_sees_system="Sé breve ✓"),
}

GOLDEN = {
    "sample/judge/plain/c-1": "ec01cec5bc9117f223477170789b81547133ff31984624e494e80df339991418",
    "sample/judge/plain/c-2": "625750e33e9d8640088898ff9380b9d0afa4b1acbf217fe709bb40bc008b4126",
    "sample/judge/rich/c-1": "fc181a3ed5f06dec155f417dadae726cf848f9b770cbfea4ddb776074e4c88db",
    "sample/judge/rich/c-2": "4e520b232e32c4408bb8fa1c96b6aa2dfd2b95d6e35fbc21c716044609bb7850",
    "sample/anthropic/plain/c-1": "59dc4e479a0e549c06c1bcca928e8b8da28463e86ede1c9e703d4f044eff0135",
    "sample/anthropic/plain/c-2": "2145f627882b8f9afa6d20e9a3c2d41a503ef88e1bb1ed15f20236fb37e4ac31",
    "sample/anthropic/rich/c-1": "ab719e7c9b76d9f7afe5fd7e49ab6cf2a4366c1206a95a95d94dd07dff3724b2",
    "sample/anthropic/rich/c-2": "0668a556addcb373f170f95eec835807661251cd3cda75f9433486e10a32c387",
    "judge/plain/plain/c-1/0/0": "4c54dd269d4a5d9cc5020b1d640007fc62489809b91b3b099fc8f8723929b04c",
    "judge/plain/plain/c-1/0/1": "0ffadafcfb649d07355ac15ab353e36eb0457a851a2652618457b8a504025b4c",
    "judge/plain/plain/c-1/1/0": "ab4af4caa2939a62dbb76433d5828e013c0f40a5110500c50d852996ea5d28bf",
    "judge/plain/plain/c-1/1/1": "452b3a2deb50d66fc4b50e850e285f66043bc21b0b236fbb8aa0540e372bfc4a",
    "judge/plain/plain/c-2/0/0": "0f9af0f91af509590b937d71f57b2e51621cf01687cffcf9587c14a92a282ff4",
    "judge/plain/plain/c-2/0/1": "f5f78fc454eed21de99ed9103129d41a89eff966606d934c5e58a59a501330c8",
    "judge/plain/rich/c-1/0/0": "68601ba7b52f3582d3edfd7001cac563ca34b029348ba6b7fd0f0eadd930f449",
    "judge/plain/rich/c-1/0/1": "40157c8721924df412717d2894903e5e1e51b0fc9c75a4581daa2a63393f1da4",
    "judge/plain/rich/c-1/1/0": "5a858ec71843790dc2c5461daa916a60e1ccf17bc9b6e41318ad8a765a553001",
    "judge/plain/rich/c-1/1/1": "13ec14e05bdbb0db2d78a5c05f1b9b5f63c1d1151cd9f43d7020d5547a08f943",
    "judge/plain/rich/c-2/0/0": "2f5ef80252d39c27d826c87c59c526fc572ecc7dd705a6823054ac62cdd77454",
    "judge/plain/rich/c-2/0/1": "44017b4cf47d395425ac3521056fbe04a7f1c2d4a868294c84aeb614745e0ddd",
    "judge/struct/plain/c-1/0/0": "e0f4e249e97ccd6ea709c3c9f666fdb7c5132ada7e39bade6bcd6ff1ca1b1f9a",
    "judge/struct/plain/c-1/0/1": "8c465f5fedef5ec9b83ca14e9d57c92c6e9b6375ef592742f6bb4dfb0b287069",
    "judge/struct/plain/c-1/1/0": "31163affe41c0d00fbb63c3814d6dcb66d4353707413fd22c6e67b3583c922ee",
    "judge/struct/plain/c-1/1/1": "7aacb51c8de16681e4c9db37835bc31b1205bff1874a59162359944f0448fc6a",
    "judge/struct/plain/c-2/0/0": "a39b6e96a5794e3680e7c65547e884abc033f49abb99f973efa54dbc64ab7781",
    "judge/struct/plain/c-2/0/1": "45058547079bef85fb969c7efb136d021a1940ed9924d7772c7a644ca793da34",
    "judge/struct/rich/c-1/0/0": "8ee43050105114f74aa80b5b17ecadcb618a60146b237aa83e89e808d21e9b69",
    "judge/struct/rich/c-1/0/1": "8cf0139417786ceaa89ffa324f335d6fe2285f869ef0b4b63aea2e045f680a7f",
    "judge/struct/rich/c-1/1/0": "1c62c726de5ce0bf4b58ea2679159d6fefee093bc7cc5bcd98090e47a6f56f4a",
    "judge/struct/rich/c-1/1/1": "a6e9bcf9a32848f2351f73d55aad8f8913c1d5566947f62d3887e40d99327718",
    "judge/struct/rich/c-2/0/0": "6f8accf9edfd52dde7e41c095a16c7b707cbb21e44e44eb8f69c9042833faaa3",
    "judge/struct/rich/c-2/0/1": "860941d86fc0095fbb451a9f3038212cca80495381ff9246e4d46842216ac754",
}


def computed() -> dict[str, str]:
    keys = {}
    for sname, spec in SPECS.items():
        for tname, settings in SETTINGS.items():
            for w in (W, W2):
                keys[f"sample/{sname}/{tname}/{w.item_id}"] = sample_request(spec, settings, w)[1]
    template = builtin_template()
    for oname, options in OPTIONS.items():
        for tname, settings in SETTINGS.items():
            for w in (W, W2):
                for i in range(len(w.criteria)):
                    for first in (0, 1):
                        g = Grading.start(w, "Rest " + ODD, i, first, options)
                        key = g.request(SPECS["judge"], settings, template, options)[2]
                        keys[f"judge/{oname}/{tname}/{w.item_id}/{i}/{first}"] = key
    return keys


def test_call_cache_keys_are_the_ones_existing_stores_hold() -> None:
    assert computed() == GOLDEN


@pytest.mark.parametrize(
    ("w", "index", "digest"),
    [
        (W, 0, "55c573b9bc6cf23cf88aafbc929b8b70d54a2b959b2a7ddfa63f4153d53130ba"),
        (W, 1, "b9fc603a45a19c6e84fe32c5495be16aba8ebb17b93911e5cdc262634d82046b"),
        (W2, 0, "88acdebcd4e76c1e13e906e113eb0747db5a518ed06b06335b1658899c3efe02"),
    ],
)
def test_judge_prompts_are_unchanged(w: WorkItem, index: int, digest: str) -> None:
    options = EngineOptions(judge_sees_system="Sé breve ✓")
    g = Grading.start(w, "Rest " + ODD, index, 0, options)
    messages = g.request(SPECS["judge"], SETTINGS["plain"], builtin_template(), options)[0]
    assert [m["role"] for m in messages] == ["user"]
    text = messages[0]["content"]
    # the documented rendering: every turn as "role: content", blank lines between, the answer last
    turns = [
        {"role": "system", "content": "Sé breve ✓"},
        *w.messages,
        {"role": "assistant", "content": "Rest " + ODD},
    ]
    head, tail = builtin_template().text.split("<<conversation>>")
    criterion = w.criteria[index]
    convo = "\n\n".join(f"{m['role']}: {m['content']}" for m in turns)
    assert text == head.replace("<<rubric_item>>", criterion) + convo + tail.replace(
        "<<rubric_item>>", criterion
    )
    assert hashlib.sha256(text.encode()).hexdigest() == digest


# floats (json writes 1e+16, not 1e16), a schema, a salt and messages that are not only strings:
# keys computed on ed62df2 (the memoized request_key) and unchanged since
FLOATS = [1e-05, 1e16, 1.5e300, 5e-324, 0.95, 1 / 3, 2.0**53]
FLOAT_SETTINGS = ModelSettings(temperature=1e-7, extra_body={"a": FLOATS, "z": {"é": 1e22, "b": None}})
SCHEMA = {"type": "object", "minimum": 1e-9, "required": ["x"]}


@pytest.mark.parametrize(
    ("messages", "digest"),
    [
        (
            [{"role": "user", "content": "hi"}],
            "dccf9e7b9cfc04cd692c233581813ba3a327cebcfc4afdb91934fdeeb04e8cd1",
        ),
        (
            [{"role": "user", "content": "hi", "weight": 1e16}],
            "91a9d55f6b2166f6aec6d2dcf36264f885af06e339805f19f718cd0b4f79567f",
        ),
        ([], "56b98771dcfba85d5593a4b5170efe9e16d0a79062f5a653b25e15b9e0c27606"),
    ],
)
def test_floats_schemas_and_salts_keep_their_keys(messages: list[dict[str, object]], digest: str) -> None:
    key = request_key(SPECS["judge"], FLOAT_SETTINGS, messages, SCHEMA, salt="repeat:1")  # type: ignore[arg-type]
    assert key == digest


def test_odd_characters_keep_their_key() -> None:
    messages = [{"role": "user", "content": '\u2028\x01 🩺 "q"'}]
    key = request_key(parse_model_spec("openai/gpt-4.1"), ModelSettings(), messages)
    assert key == "b2f8335db0dae2d77b5f879b8bd3395666ead0ed07e2874c0fec0c09b18dbae0"


def test_the_order_of_keys_in_a_request_is_irrelevant() -> None:
    spec = SPECS["judge"]
    settings = ModelSettings(extra_body={"seed": 7, "top_p": 0.9})
    again = ModelSettings(extra_body={"top_p": 0.9, "seed": 7})
    messages = [{"role": "user", "content": "hi"}]
    reordered = [{"content": "hi", "role": "user"}]
    schema = {"type": "object", "required": ["x"]}
    key = request_key(spec, settings, messages, schema)
    assert request_key(spec, again, reordered, {"required": ["x"], "type": "object"}) == key


def test_a_request_changed_in_place_gets_its_new_key() -> None:
    spec = SPECS["judge"]
    schema: dict[str, object] = {"type": "object", "required": ["x"]}
    settings = ModelSettings(temperature=0.5, extra_body={"seed": 1})
    messages = [{"role": "user", "content": "hi"}]
    first = request_key(spec, settings, messages, schema)
    schema["required"] = ["y"]
    second = request_key(spec, settings, messages, schema)
    settings.extra_body["seed"] = 2
    third = request_key(spec, settings, messages, schema)
    assert len({first, second, third}) == 3
    assert third == request_key(
        spec, ModelSettings(temperature=0.5, extra_body={"seed": 2}), messages, schema
    )
