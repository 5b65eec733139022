"""Test copy of Kaggle's kaggle_datasets client: POST <KAGGLE_URL_BASE>/requests/CopyDatasetVersionToKnownGcsBucketRequest
with {"MountSlug": slug, "IntegrationType": 2 with a TPU else 1}; the answer's result.destinationBucket is the path."""

import os

from kaggle_secrets import UserSecretsClient


class KaggleDatasets:
    GET_GCS_PATH_ENDPOINT = "/requests/CopyDatasetVersionToKnownGcsBucketRequest"

    def get_gcs_path(self, dataset_dir=None):
        integration = 2 if os.getenv("TPU_NAME") else 1
        body = {"MountSlug": dataset_dir, "IntegrationType": integration}
        return UserSecretsClient()._post(self.GET_GCS_PATH_ENDPOINT, body)["destinationBucket"]
