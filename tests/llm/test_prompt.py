from appliance.llm.prompt import Message, render_gemma


def test_system_text_is_folded_into_the_first_user_turn():
    text = render_gemma([Message("system", "SYS"), Message("user", "hi")])
    assert text == "<start_of_turn>user\nSYS\n\nhi<end_of_turn>\n<start_of_turn>model\n"


def test_history_alternates_and_ends_with_an_open_model_turn():
    text = render_gemma([
        Message("system", "S"), Message("user", "a"), Message("assistant", "b"), Message("user", "c"),
    ])
    assert text.count("<start_of_turn>user") == 2
    assert "<start_of_turn>model\nb<end_of_turn>" in text
    assert text.endswith("<start_of_turn>model\n")
    assert text.index("S\n\na") < text.index("c")
