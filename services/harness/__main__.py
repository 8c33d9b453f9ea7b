from livehost.service import main
from services.harness.server import build

if __name__ == "__main__":
    main(build)
