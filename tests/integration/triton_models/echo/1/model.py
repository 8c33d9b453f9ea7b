"""Test-only Triton python-backend model: returns its input unchanged."""

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def execute(self, requests):  # type: ignore[no-untyped-def]
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            out = pb_utils.Tensor("OUTPUT", data)
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
