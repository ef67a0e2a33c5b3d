from caption.make_model.cli import main

if __name__ == "__main__":
    main()
