"""Test copy of Kaggle's kaggle_secrets client (only in Kaggle's image): the same class and methods,
speaking the same protocol to KAGGLE_URL_BASE. POST <base>/requests/GetUserSecretByLabelRequest with
{"Label": name, "JWE": token} and `Authorization: Bearer <token>`; the answer is
{"wasSuccessful": true, "result": {"secret": value}}; errors are BackendError / CredentialError."""

import json
import os
import urllib.error
import urllib.request


class CredentialError(Exception):
    pass


class BackendError(Exception):
    pass


class UserSecretsClient:
    GET_USER_SECRET_BY_LABEL_ENDPOINT = "/requests/GetUserSecretByLabelRequest"

    def __init__(self):
        self.url_base = os.getenv("KAGGLE_URL_BASE", "https://www.kaggle.com")
        self.token = os.getenv("KAGGLE_USER_SECRETS_TOKEN")
        if self.token is None:
            raise CredentialError("A JWT Token is required, but none found in KAGGLE_USER_SECRETS_TOKEN")

    def _post(self, endpoint, body):
        request = urllib.request.Request(
            self.url_base + endpoint,
            data=json.dumps({**body, "JWE": self.token}).encode(),
            headers={"Content-type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                raise CredentialError(f"Service responded with error code {error.code}.") from error
            raise BackendError("Unexpected response from the service.") from error
        except urllib.error.URLError as error:
            raise ConnectionError("Connection error trying to communicate with service.") from error
        if not answer.get("wasSuccessful") or "result" not in answer:
            raise BackendError(f"Unexpected response from the service. Response: {answer}.")
        return answer["result"]

    def get_secret(self, label):
        result = self._post(self.GET_USER_SECRET_BY_LABEL_ENDPOINT, {"Label": label})
        if "secret" not in result:
            raise BackendError(f"Unexpected response from the service. Response: {result}")
        return result["secret"]
