"""The checks a generation request passes before any model runs, and the stop-string cutter (logic only)."""

import pytest
from hpcfair.compute import CodedError
from hpcfair.generate import GenerateRequest, supports
from hpcfair.generate.families import route_of
from hpcfair.generate.run import StopWatch

from tests.generation.lm import Scripted


def test_a_prompt_with_defaults():
    request = GenerateRequest.parse({"prompt": "hello"})
    assert (request.prompt, request.max_new_tokens, request.temperature, request.greedy) == ("hello", 128, 1.0, False)
    assert GenerateRequest.parse({"prompt": "x", "temperature": 0}).greedy


def test_chat_messages_and_options():
    request = GenerateRequest.parse({"messages": [{"role": "user", "content": "hi"}], "max_new_tokens": 5,
                                     "top_p": 0.9, "top_k": 4, "seed": 7, "stop": "\n"})
    assert request.messages == ({"role": "user", "content": "hi"},)
    assert (request.top_p, request.top_k, request.seed, request.stop) == (0.9, 4, 7, ("\n",))


def test_a_messages_content_may_be_a_list_of_text_parts():
    """OpenAI's content parts (``[{"type": "text", "text": …}]``, what many clients send): the text parts, in order;
    an image or audio part is refused in words, not read."""
    request = GenerateRequest.parse({"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}]})
    assert request.messages == ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello\nthere"})
    for part in ({"type": "image_url", "image_url": {"url": "http://x/a.png"}}, {"type": "text", "text": 3}, "text"):
        with pytest.raises(CodedError) as caught:
            GenerateRequest.parse({"messages": [{"role": "user", "content": [part]}]})
        assert caught.value.code == "invalid" and "messages[0]" in caught.value.detail
        assert "text parts" in caught.value.detail


@pytest.mark.parametrize("body, words", [
    ({}, "either 'prompt'"),
    ({"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "not both"),
    ({"prompt": ""}, "non-empty string"),
    ({"messages": []}, "non-empty list"),
    ({"messages": [{"role": "user"}]}, "messages[0]"),
    ({"prompt": "a", "max_new_tokens": 0}, "'max_new_tokens' must be from 1 to 64"),
    ({"prompt": "a", "max_new_tokens": 65}, "from 1 to 64"),
    ({"prompt": "a", "max_new_tokens": 2.5}, "an integer"),
    ({"prompt": "a", "temperature": 3}, "'temperature' must be from 0.0 to 2.0"),
    ({"prompt": "a", "top_p": 0}, "'top_p' must be above 0.0"),
    ({"prompt": "a", "seed": -1}, "'seed' must be an integer"),
    ({"prompt": "a", "seed": True}, "'seed' must be an integer"),
    ({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}, "up to 4"),
    ({"prompt": "a", "stop": [""]}, "non-empty strings"),
    ("just text", "JSON object"),
])
def test_bad_requests_are_refused_in_words(body, words):
    with pytest.raises(CodedError) as caught:
        GenerateRequest.parse(body, max_tokens=64)
    assert caught.value.code == "invalid"
    assert words in caught.value.detail


def test_stop_strings_cut_the_text_even_across_pieces():
    watch = StopWatch(("END",))
    assert watch.feed("abc E") == ("abc", False)  # " E" might begin the stop string: held back
    assert watch.feed("N") == (" ", False)  # "EN" still might
    assert watch.feed("D more") == ("", True)  # it did: nothing of it is sent, and generation ends
    watch = StopWatch(("END", "\n"))
    assert watch.feed("one\ntwo") == ("one", True)  # the first of several stop strings to appear


def test_text_without_stops_passes_whole():
    watch = StopWatch(())
    assert watch.feed("ab") == ("ab", False)
    watch = StopWatch(("xyz",))
    assert watch.feed("abxy") == ("ab", False)
    assert watch.flush() == "xy"


@pytest.mark.parametrize("config, route", [
    ({"architectures": ["LlamaForCausalLM"]}, "genai"), ({"architectures": ["Qwen2ForCausalLM"]}, "genai"),
    ({"architectures": ["MistralForCausalLM"]}, "genai"), ({"architectures": ["GPT2LMHeadModel"]}, "decoder"),
    ({"architectures": ["OPTForCausalLM"]}, "decoder"),
    ({"architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}, "encoder-decoder"),
    ({"architectures": ["MarianMTModel"], "is_encoder_decoder": True}, "encoder-decoder"),
    ({"architectures": ["WhisperForConditionalGeneration"], "is_encoder_decoder": True, "num_mel_bins": 80}, ""),
    ({"architectures": ["VisionEncoderDecoderModel"], "is_encoder_decoder": True, "encoder": {}}, ""),
    ({"architectures": ["BertModel"]}, ""), ({"architectures": []}, "")])
def test_which_folders_get_a_generation_model_and_by_which_route(config, route):
    assert route_of(config) == route
    assert supports(config) is bool(route)


@pytest.mark.parametrize("body", [{"prompt": "a", "seed": 3, "stop": ["x"]},
                                  {"messages": [{"role": "user", "content": "b"}], "temperature": 0}])
def test_a_request_goes_to_the_engine_and_back_unchanged(body):
    request = GenerateRequest.parse(body)
    assert GenerateRequest.parse(request.to_dict()) == request


def test_sampling_keeps_to_top_k_and_top_p():
    import numpy as np
    from hpcfair.generate.onnx_loop import sample

    scores = np.log(np.array([0.05, 0.5, 0.3, 0.15]))
    random = np.random.default_rng(0)
    assert {sample(scores, 1, 1.0, random) for _ in range(50)} == {1}
    assert {sample(scores, 0, 0.7, random) for _ in range(200)} == {1, 2}  # 0.5 + 0.3 reach 0.7
    assert {sample(scores, 3, 1.0, random) for _ in range(400)} == {1, 2, 3}
    drawn = [sample(scores, 0, 1.0, np.random.default_rng(seed)) for seed in range(3)]
    assert drawn == [sample(scores, 0, 1.0, np.random.default_rng(seed)) for seed in range(3)]


def _kv_tokenizer(tmp_path):
    from hpcfair.generate.onnx_loop import KvTokenizer

    from tests.generation.lm import tokenizer

    tokenizer().save_pretrained(tmp_path)
    return KvTokenizer(tmp_path)


@pytest.mark.parametrize("text, cut, stop, expected", [
    ("node €", 1, (), "node \ufffd"),  # cut inside "€" (3 bytes): the stream held 2 of them
    ("node é", 1, (), "node \ufffd"),  # 2 bytes, 1 given: held back, then given as the whole decode renders it
    ("node €", 0, (), "node €"),  # a whole answer: nothing held
    ("node €", 1, ("xyz",), "node \ufffd"),  # the stop watch's own held tail is given too
])
def test_a_streamed_answer_ends_with_what_decoding_it_whole_gives(tmp_path, monkeypatch, text, cut, stop, expected):
    from hpcfair.generate import run

    tok = _kv_tokenizer(tmp_path)
    ids = tok.encode(text)
    tokens = ids[:len(ids) - cut]
    assert tok.decode(tokens) == expected  # what a one-piece answer decodes to
    monkeypatch.setattr(run, "start", lambda loaded, prompt, **options: Scripted(tokens))
    loaded = run.LoadedModel(model=None, tokenizer=tok, context_length=64, folder=tmp_path)
    pieces = list(run.generate(loaded, GenerateRequest.parse({"prompt": "a", "stop": list(stop)}, max_tokens=64)))
    assert "".join(piece.text for piece in pieces) == expected
    assert pieces[-1].done and pieces[-1].finish_reason == "length"


def test_an_end_token_does_not_drop_the_text_held_for_a_stop_string(tmp_path, monkeypatch):
    from hpcfair.generate import run

    tok = _kv_tokenizer(tmp_path)
    tokens = [*tok.encode("the hub"), 2]  # then </s>
    monkeypatch.setattr(run, "start", lambda loaded, prompt, **options: Scripted(tokens))
    loaded = run.LoadedModel(model=None, tokenizer=tok, context_length=64, folder=tmp_path, ends=frozenset({2}))
    pieces = list(run.generate(loaded, GenerateRequest.parse({"prompt": "a", "stop": ["zzzz"]}, max_tokens=64)))
    assert "".join(piece.text for piece in pieces) == "the hub"
    assert pieces[-1].finish_reason == "stop"


def test_a_held_tail_that_completes_a_stop_string_ends_with_stop(tmp_path, monkeypatch):
    from hpcfair.generate import run

    tok = _kv_tokenizer(tmp_path)
    ids = tok.encode("node €")
    monkeypatch.setattr(run, "start", lambda loaded, prompt, **options: Scripted(ids[:-1]))
    loaded = run.LoadedModel(model=None, tokenizer=tok, context_length=64, folder=tmp_path)
    pieces = list(run.generate(loaded, GenerateRequest.parse({"prompt": "a", "stop": ["e \ufffd"]}, max_tokens=64)))
    assert "".join(piece.text for piece in pieces) == "nod" and pieces[-1].finish_reason == "stop"


# --- the hub's own request to a served model's server, and its OpenAI stream read back --------------------


@pytest.mark.parametrize("body", [
    {"prompt": "Once", "max_new_tokens": 7, "temperature": 0, "stop": ["\n"], "seed": 3},
    {"messages": [{"role": "user", "content": "hi"}], "max_new_tokens": 4, "top_p": 0.5, "top_k": 9}])
def test_a_hub_request_reaches_a_served_model_as_the_same_request(body):
    """``request_of`` is OpenAI's form of a hub request: the node's server (``openai.parse``) reads it back equal."""
    from hpcfair.generate import openai

    asked = GenerateRequest.parse(body)
    route, sent = openai.request_of(asked, "alice/lm@1")
    chat = route == "chat/completions"
    assert chat == bool(asked.messages) and sent["model"] == "alice/lm@1"
    again = openai.parse(sent, chat=chat, max_tokens=4096)
    assert again.request == asked and again.stream and again.usage


def test_an_openai_stream_reads_back_as_the_pieces_it_was_made_of():
    from hpcfair.generate import openai

    made = [{"text": "Hel"}, {"text": ""}, {"text": "lo"},
            {"text": " you", "done": True, "finish_reason": "length", "prompt_tokens": 3, "completion_tokens": 4,
             "seconds_to_first": 0.1, "seconds": 0.2}]
    for chat in (True, False):
        lines = b"".join(openai.chunks(made, chat=chat, ident="x", created=0, model="m", usage=True)).splitlines(True)
        clock = iter(range(100)).__next__
        read = list(openai.pieces_of(lines, clock=clock))
        assert [p["text"] for p in read] == ["Hel", "lo", " you", ""]
        last = read[-1]
        assert last["done"] and (last["finish_reason"], last["prompt_tokens"], last["completion_tokens"]) == (
            "length", 3, 4)
        assert (last["seconds_to_first"], last["seconds"]) == (1, 2)  # the hub's clock: first text, then the end
        assert openai.collect(read)["text"] == "Hello you"


def test_a_served_models_error_or_cut_stream_is_an_error_piece():
    from hpcfair.generate import openai

    failed = b"".join(openai.chunks([{"text": "a"}, {"error": "memory_limit", "detail": "too big"}], chat=False,
                                    ident="x", created=0, model="m")).splitlines(True)
    assert list(openai.pieces_of(failed))[-1] == {"error": "memory_limit", "detail": "too big"}
    cut = list(openai.pieces_of([b'data: {"choices": [{"text": "a"}]}\n', b"\n", b"data: {not json\n"]))
    assert cut[0] == {"text": "a"} and cut[-1]["error"] == "worker_timeout"
    with pytest.raises(CodedError) as refused:
        openai.collect(cut)
    assert refused.value.code == "worker_timeout"
